package packages

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writePackage writes a package directory: name's manifest at version
// with kv_version kv, declaring the extension type typ.
func writePackage(t *testing.T, dir, name, version string, kv int, typ string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	m := fmt.Sprintf(`{"name":%q,"version":%q,"command":["./run"],"protocol":[1],"provides":{"extensions":[{"type":%q}]},"kv_version":%d}`,
		name, version, typ, kv)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "open-conduit-extension.json"), []byte(m), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run"), []byte("#!/bin/sh\n"), 0o755))
	return dir
}

func openTree(t *testing.T, root string) *Tree {
	t.Helper()
	tr, err := Open(root, "")
	require.NoError(t, err)
	t.Cleanup(tr.Close)
	return tr
}

func installedVersion(t *testing.T, tr *Tree, name string) string {
	t.Helper()
	rel, _, err := ReleaseAt(tr.Dir(name))
	if err != nil {
		return ""
	}
	return rel.Version
}

func install(t *testing.T, tr *Tree, src, op string) Record {
	t.Helper()
	s, err := tr.Stage(src)
	require.NoError(t, err)
	rec, err := tr.Commit(s, op)
	require.NoError(t, err)
	return rec
}

func TestInstallUpdateRollbackRemove(t *testing.T) {
	src, root := t.TempDir(), t.TempDir()
	v1 := writePackage(t, filepath.Join(src, "v1"), "demo", "1.0.0", 0, "demo")
	v2 := writePackage(t, filepath.Join(src, "v2"), "demo", "2.0.0", 1, "demo")
	tr := openTree(t, root)

	rec := install(t, tr, v1, OpInstall)
	assert.Equal(t, "1.0.0", installedVersion(t, tr, "demo"))
	assert.Nil(t, rec.Previous)
	rec = install(t, tr, v2, OpUpdate)
	assert.Equal(t, "2.0.0", installedVersion(t, tr, "demo"))
	require.NotNil(t, rec.Previous)
	assert.Equal(t, "1.0.0", rec.Previous.Version)
	prev, _, err := tr.Previous("demo")
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", prev.Version)

	_, err = tr.Rollback("demo")
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", installedVersion(t, tr, "demo"))
	prev, _, err = tr.Previous("demo")
	require.NoError(t, err)
	assert.Equal(t, "2.0.0", prev.Version, "the release rolled back from is kept")

	_, err = tr.Remove("demo")
	require.NoError(t, err)
	assert.False(t, tr.Installed("demo"))
	_, _, err = tr.Previous("demo")
	assert.ErrorIs(t, err, ErrNoPrevious)

	l, err := tr.Ledger()
	require.NoError(t, err)
	var ops []string
	for _, r := range l.Records {
		ops = append(ops, r.Op+" "+r.Version)
		assert.NotEmpty(t, r.Digest)
	}
	assert.Equal(t, []string{"install 1.0.0", "update 2.0.0", "rollback 1.0.0", "remove 1.0.0"}, ops)
	_, ok := l.Current("demo")
	assert.False(t, ok)
}

func TestConflictsAreCheckedAgainstInstalledAndBundled(t *testing.T) {
	src, root, bundled := t.TempDir(), t.TempDir(), t.TempDir()
	// "alpha" may own "alpha-x", and so may the package "alpha-x".
	writePackage(t, filepath.Join(bundled, "bund"), "bund", "1", 0, "bund-x")
	tr, err := Open(root, bundled)
	require.NoError(t, err)
	defer tr.Close()
	install(t, tr, writePackage(t, filepath.Join(src, "a"), "alpha", "1", 0, "alpha-x"), OpInstall)

	clash, err := tr.Stage(writePackage(t, filepath.Join(src, "ax"), "alpha-x", "1", 0, "alpha-x"))
	require.NoError(t, err)
	defer clash.Discard()
	err = tr.CheckConflicts(clash.Manifest)
	require.ErrorIs(t, err, ErrConflict)
	assert.Contains(t, err.Error(), `config type "alpha-x" is claimed by alpha and alpha-x`)

	bclash, err := tr.Stage(writePackage(t, filepath.Join(src, "bx"), "bund-x", "1", 0, "bund-x"))
	require.NoError(t, err)
	defer bclash.Discard()
	require.ErrorIs(t, tr.CheckConflicts(bclash.Manifest), ErrConflict, "a bundled package's names count")

	replace, err := tr.Stage(writePackage(t, filepath.Join(src, "b2"), "bund", "2", 0, "bund-x"))
	require.NoError(t, err)
	defer replace.Discard()
	assert.NoError(t, tr.CheckConflicts(replace.Manifest), "an installed package replaces the bundled one of its name")

	update, err := tr.Stage(writePackage(t, filepath.Join(src, "a2"), "alpha", "2", 0, "alpha-x"))
	require.NoError(t, err)
	defer update.Discard()
	assert.NoError(t, tr.CheckConflicts(update.Manifest), "an update replaces its own release")
}

func TestStageRefusesAnInvalidManifest(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "open-conduit-extension.json"), []byte(`{"name":"x","bogus":1}`), 0o644))
	tr := openTree(t, t.TempDir())
	_, err := tr.Stage(src)
	require.ErrorIs(t, err, ErrInvalidSource)
	entries, err := os.ReadDir(filepath.Join(tr.Root(), StagingDir))
	require.NoError(t, err)
	assert.Empty(t, entries, "a refused package leaves nothing staged")
}

// crash stands for the process dying at a hold point: the panic unwinds
// past every step after it, as a kill would.
type crash struct{}

func crashAt(point string) func(string) {
	return func(p string) {
		if p == point {
			panic(crash{})
		}
	}
}

func commitCrashing(t *testing.T, tr *Tree, point string, do func()) {
	t.Helper()
	tr.Hold = crashAt(point)
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(crash); !ok {
					panic(r)
				}
			}
		}()
		do()
		t.Fatalf("no crash at %s", point)
	}()
	tr.Close()
}

// TestACrashLeavesTheOldRelease: an update, a rollback and a removal
// killed at each hold point leave the old release installed once the
// tree is opened again, with nothing staged and nothing in the ledger.
func TestACrashLeavesTheOldRelease(t *testing.T) {
	for _, point := range []string{HoldStaged, HoldDisplaced} {
		for _, op := range []string{OpUpdate, OpRollback, OpRemove} {
			t.Run(op+"/"+point, func(t *testing.T) {
				src, root := t.TempDir(), t.TempDir()
				tr, err := Open(root, "")
				require.NoError(t, err)
				install(t, tr, writePackage(t, filepath.Join(src, "v1"), "demo", "1.0.0", 0, "demo"), OpInstall)
				install(t, tr, writePackage(t, filepath.Join(src, "v2"), "demo", "2.0.0", 0, "demo"), OpUpdate)
				v3 := writePackage(t, filepath.Join(src, "v3"), "demo", "3.0.0", 0, "demo")
				before, err := tr.Ledger()
				require.NoError(t, err)
				commitCrashing(t, tr, point, func() {
					switch op {
					case OpUpdate:
						s, err := tr.Stage(v3)
						require.NoError(t, err)
						_, _ = tr.Commit(s, OpUpdate)
					case OpRollback:
						_, _ = tr.Rollback("demo")
					case OpRemove:
						_, _ = tr.Remove("demo")
					}
				})
				if point == HoldDisplaced {
					assert.NoDirExists(t, filepath.Join(root, "demo"), "the crash is at the moment the directory is absent")
				}
				tr = openTree(t, root)
				assert.Equal(t, "2.0.0", installedVersion(t, tr, "demo"))
				prev, _, err := tr.Previous("demo")
				require.NoError(t, err)
				assert.Equal(t, "1.0.0", prev.Version, "the previous release is kept")
				entries, err := os.ReadDir(filepath.Join(root, StagingDir))
				require.NoError(t, err)
				assert.Empty(t, entries)
				after, err := tr.Ledger()
				require.NoError(t, err)
				assert.Equal(t, before, after)
			})
		}
	}
}

// TestACrashAfterTheLedgerFinishes: once the ledger has the record the
// change is finished on recovery, not undone.
func TestACrashAfterTheLedgerFinishes(t *testing.T) {
	src, root := t.TempDir(), t.TempDir()
	tr := openTree(t, root)
	install(t, tr, writePackage(t, filepath.Join(src, "v1"), "demo", "1.0.0", 0, "demo"), OpInstall)
	s, err := tr.Stage(writePackage(t, filepath.Join(src, "v2"), "demo", "2.0.0", 0, "demo"))
	require.NoError(t, err)
	j := journal{Record: Record{ID: s.id, Op: OpUpdate, Name: "demo", Version: "2.0.0"}, Staged: s.id, Displaced: s.id + ".old", HadOld: true}
	require.NoError(t, writeJSONAtomic(tr.journalPath(s.id), j))
	require.NoError(t, os.Rename(tr.Dir("demo"), tr.staging(j.Displaced)))
	require.NoError(t, os.Rename(s.Dir, tr.Dir("demo")))
	require.NoError(t, tr.appendRecord(j.Record))
	tr.Close()

	tr = openTree(t, root)
	assert.Equal(t, "2.0.0", installedVersion(t, tr, "demo"))
	prev, _, err := tr.Previous("demo")
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", prev.Version)
}

func TestOneCommandAtATime(t *testing.T) {
	root := t.TempDir()
	tr := openTree(t, root)
	_, err := Open(root, "")
	require.ErrorIs(t, err, ErrBusy)
	assert.NoError(t, Recover(root), "the daemon leaves a busy tree to the command holding it")
	tr.Close()
	tr2, err := Open(root, "")
	require.NoError(t, err)
	tr2.Close()
}

func TestCheckKV(t *testing.T) {
	src := t.TempDir()
	tr := openTree(t, t.TempDir())
	s, err := tr.Stage(writePackage(t, filepath.Join(src, "p"), "demo", "1", 1, "demo"))
	require.NoError(t, err)
	defer s.Discard()
	assert.NoError(t, CheckKV(s.Manifest, 1))
	assert.NoError(t, CheckKV(s.Manifest, 0))
	err = CheckKV(s.Manifest, 2)
	require.ErrorIs(t, err, ErrKVDowngrade)
	assert.Contains(t, err.Error(), "restore a backup")
	assert.Equal(t, Code("kv_downgrade"), CodeOf(err))
}

func TestEveryPermissionIsExplained(t *testing.T) {
	for _, p := range protocol.KnownPermissions() {
		assert.NotEmpty(t, PermissionAllows(p), p)
	}
	assert.Empty(t, PermissionAllows("no.such"), "negative control")
}
