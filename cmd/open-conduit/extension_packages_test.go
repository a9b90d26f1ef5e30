package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/host/packages"
	"github.com/open-conduit/open-conduit/internal/daemontest"
)

// The packaging tests drive the real binary as an operator would: the
// commands in their own processes, the daemon through daemontest. Their
// package is testdata/layoutext, one binary serving whichever release's
// manifest sits beside it.

var (
	layoutOnce sync.Once
	layoutPath string
	layoutErr  error
)

// layoutBinary builds testdata/layoutext once, beside the shared binary
// (removed with it).
func layoutBinary(t *testing.T) string {
	t.Helper()
	daemonBinary(t)
	layoutOnce.Do(func() {
		layoutPath = filepath.Join(binDir, "layoutext")
		if out, err := exec.Command("go", "build", "-o", layoutPath, "./testdata/layoutext").CombinedOutput(); err != nil {
			layoutErr = fmt.Errorf("go build ./testdata/layoutext: %v\n%s", err, out)
		}
	})
	if layoutErr != nil {
		t.Fatal(layoutErr)
	}
	return layoutPath
}

// release writes a package directory of layoutext: name's manifest at
// version with kv_version kv, declaring the config types types (name's
// own when none).
func release(t *testing.T, dir, name, version string, kv int, types ...string) string {
	t.Helper()
	bin := layoutBinary(t)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	if len(types) == 0 {
		types = []string{name}
	}
	var decls []map[string]string
	for _, typ := range types {
		decls = append(decls, map[string]string{"type": typ})
	}
	m, err := json.Marshal(map[string]any{"name": name, "version": version, "command": []string{"./layoutext"},
		"protocol": []int{1}, "provides": map[string]any{"extensions": decls}, "kv_version": kv})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "open-conduit-extension.json"), m, 0o644))
	if err := os.Link(bin, filepath.Join(dir, "layoutext")); err != nil {
		data, rerr := os.ReadFile(bin)
		require.NoError(t, rerr)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "layoutext"), data, 0o755))
	}
	return dir
}

// tarball packs the package directory dir as DEST.tar.gz with its files
// under one top directory, as `tar czf` of a directory does.
func tarball(t *testing.T, dir, dest string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	top := filepath.Base(dir)
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		require.NoError(t, err)
		h, err := tar.FileInfoHeader(info, "")
		require.NoError(t, err)
		h.Name = filepath.ToSlash(filepath.Join(top, rel))
		if d.IsDir() {
			h.Name += "/"
		}
		require.NoError(t, tw.WriteHeader(h))
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			_, err = tw.Write(data)
			require.NoError(t, err)
		}
		return nil
	}))
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(dest, buf.Bytes(), 0o644))
	return dest
}

// ocResult is one run of the binary.
type ocResult struct {
	stdout, stderr string
	code           int
}

// changeJSON decodes a change command's --json answer.
func (r ocResult) change(t *testing.T) changeResult {
	t.Helper()
	var res changeResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	return res
}

// oc runs the binary bin with args (and env added), stdin not a terminal.
func oc(t *testing.T, bin string, env []string, args ...string) ocResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return ocResult{stdout.String(), stderr.String(), code}
}

// dirs are the --config and --state a command runs with.
type dirs struct{ config, state string }

func (d dirs) flags() []string { return []string{"--config", d.config, "--state", d.state} }

func (d dirs) oc(t *testing.T, args ...string) ocResult {
	t.Helper()
	return oc(t, daemonBinary(t), nil, append(args, d.flags()...)...)
}

func pkgStatus(t *testing.T, c *client.Client, name string) (client.Package, bool) {
	t.Helper()
	st, err := c.Status(context.Background())
	require.NoError(t, err)
	for _, p := range st.Packages {
		if p.Name == name {
			return p, true
		}
	}
	return client.Package{}, false
}

// treeListing is the install tree's entries and the ledger's bytes: what
// a refused change must leave as it was.
func treeListing(t *testing.T, config string) string {
	t.Helper()
	var b strings.Builder
	root := filepath.Join(config, "extensions")
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(root, p)
			fmt.Fprintln(&b, rel)
		}
		return nil
	})
	ledger, _ := os.ReadFile(filepath.Join(root, packages.LedgerFile))
	b.Write(ledger)
	return b.String()
}

// TestPackagingWithARunningDaemon walks a package through install (from a
// directory and from an archive), a refused conflicting install, updates
// with and without a KV migration, rollbacks before and after it, a
// refused downgrade, and removal refused while in use, against a running
// daemon: each change is reloaded through the API and the package beside
// it (runner) keeps its process throughout. A layoutext release fails to
// start while another holds its state directory's lock, so an update
// that started the new release before stopping the old would fail here.
func TestPackagingWithARunningDaemon(t *testing.T) {
	bin := daemonBinary(t)
	src := t.TempDir()
	v1 := release(t, filepath.Join(src, "v1"), "layoutext", "1.0.0", 0, "layoutext", "layoutext-extra")
	v11 := release(t, filepath.Join(src, "v11"), "layoutext", "1.1.0", 0, "layoutext", "layoutext-extra")
	v2 := release(t, filepath.Join(src, "v2"), "layoutext", "2.0.0", 1, "layoutext", "layoutext-extra")
	clash := release(t, filepath.Join(src, "clash"), "layoutext-extra", "1.0.0", 0)

	d := daemontest.Start(t, daemontest.Options{Binary: bin, Packages: []string{"../../extensions/runner"}})
	dd := dirs{d.ConfigDir, d.StateDir}
	ctx := context.Background()
	runner, ok := pkgStatus(t, d.Client, "runner")
	require.True(t, ok)
	require.NotZero(t, runner.PID)
	runnerKept := func(step string) {
		t.Helper()
		now, ok := pkgStatus(t, d.Client, "runner")
		require.True(t, ok)
		assert.Equal(t, runner.PID, now.PID, "%s restarted runner", step)
		assert.Equal(t, "ready", now.State, step)
		assert.Equal(t, 0, now.Restarts, step)
	}
	running := func(version string) client.Package {
		t.Helper()
		p, ok := pkgStatus(t, d.Client, "layoutext")
		require.True(t, ok, "the daemon runs layoutext")
		assert.Equal(t, version, p.Version)
		assert.Equal(t, "ready", p.State, p.LastError)
		assert.Equal(t, client.OriginInstalled, p.Origin)
		return p
	}

	// Install from a directory: reloaded, nothing else restarted.
	r := dd.oc(t, "extension", "install", "--yes", "--json", v1)
	require.Equal(t, 0, r.code, r.stderr)
	res := r.change(t)
	assert.True(t, res.OK)
	require.NotNil(t, res.Reload)
	assert.Equal(t, []string{"layoutext"}, res.Reload.Started)
	assert.Contains(t, res.Reload.Unchanged, "runner")
	first := running("1.0.0")
	runnerKept("install")

	// Installing it again is refused: that is an update.
	r = dd.oc(t, "extension", "install", "--yes", "--json", v11)
	assert.Equal(t, 1, r.code)
	assert.Equal(t, packages.Code("already_installed"), r.change(t).Code)

	// A package whose names clash is refused and nothing changes.
	before := treeListing(t, d.ConfigDir)
	r = dd.oc(t, "extension", "install", "--yes", "--json", clash)
	assert.Equal(t, 1, r.code)
	assert.Equal(t, packages.Code("conflict"), r.change(t).Code)
	assert.Contains(t, r.stderr, `config type "layoutext-extra" is claimed by layoutext and layoutext-extra`)
	assert.Equal(t, before, treeListing(t, d.ConfigDir), "a refused install changes nothing on disk")
	_, ok = pkgStatus(t, d.Client, "layoutext-extra")
	assert.False(t, ok)

	// An update without a migration: the old process stops, the new runs.
	r = dd.oc(t, "extension", "update", "--yes", "--json", v11)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, []string{"layoutext"}, r.change(t).Reload.Restarted)
	second := running("1.1.0")
	assert.NotEqual(t, first.PID, second.PID)
	runnerKept("update")

	// A rollback before any migration is allowed.
	r = dd.oc(t, "extension", "rollback", "--yes", "--json", "layoutext")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "1.0.0", r.change(t).Record.Version)
	running("1.0.0")

	// An update that migrates KV: configure carries stored 0 < declared 1.
	r = dd.oc(t, "extension", "update", "--yes", v2)
	require.Equal(t, 0, r.code, r.stderr)
	running("2.0.0")
	kv, err := d.Client.KV(ctx, client.KVQuery{Package: "layoutext"})
	require.NoError(t, err)
	require.Len(t, kv.Entries, 1)
	assert.Equal(t, "migrated", kv.Entries[0].Key)
	assert.JSONEq(t, `{"from":0,"to":1}`, string(kv.Entries[0].Value))
	layouts, err := d.Client.KVLayouts(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, layouts["layoutext"])
	runnerKept("the migrating update")

	// inspect says the layout the store records, and that the rollback
	// it keeps is refused on it.
	r = dd.oc(t, "extension", "inspect", "layoutext")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "  kv layout:    1 recorded in the store")
	assert.Regexp(t, `rollback to:  1\.0\.0 \(kv_version 0, sha256:[0-9a-f]+; refused: the KV was migrated past it\)`, r.stdout)
	var in inspection
	r = dd.oc(t, "extension", "inspect", "--json", "layoutext")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &in))
	require.NotNil(t, in.KVLayout)
	assert.Equal(t, 1, *in.KVLayout)

	// An older kv_version is refused, whether updated to or rolled back to.
	before = treeListing(t, d.ConfigDir)
	r = dd.oc(t, "extension", "update", "--yes", "--json", v1)
	assert.Equal(t, 1, r.code)
	assert.Equal(t, packages.Code("kv_downgrade"), r.change(t).Code)
	r = dd.oc(t, "extension", "rollback", "--yes", "--json", "layoutext")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, packages.Code("kv_downgrade"), r.change(t).Code)
	assert.Contains(t, r.stderr, "restore a backup")
	assert.Contains(t, r.stderr, "kv_version 1 or newer")
	assert.Equal(t, before, treeListing(t, d.ConfigDir))
	running("2.0.0")

	// Removal is refused while the configuration uses the package.
	cfg := []byte(`{"scopes":[{"id":"main","entries":[{"id":"one","type":"layoutext"}]}]}`)
	require.NoError(t, daemontest.WriteConfig(d.ConfigDir, cfg))
	_, err = d.Client.ApplyConfig(ctx, cfg)
	require.NoError(t, err)
	r = dd.oc(t, "extension", "remove", "--json", "layoutext")
	assert.Equal(t, 1, r.code)
	res = r.change(t)
	assert.Equal(t, packages.Code("in_use"), res.Code)
	assert.Contains(t, strings.Join(res.Uses, "\n"), `$.scopes[0].entries[0]: entry "one" of type layoutext in scope main`)
	assert.Contains(t, r.stderr, "$.scopes[0].entries[0]")
	running("2.0.0")

	// Without the entry it goes, and the daemon stops it.
	cfg = []byte(`{"scopes":[{"id":"main"}]}`)
	require.NoError(t, daemontest.WriteConfig(d.ConfigDir, cfg))
	_, err = d.Client.ApplyConfig(ctx, cfg)
	require.NoError(t, err)
	r = dd.oc(t, "extension", "remove", "--json", "layoutext")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, []string{"layoutext"}, r.change(t).Reload.Stopped)
	_, ok = pkgStatus(t, d.Client, "layoutext")
	assert.False(t, ok)
	runnerKept("remove")

	// Install from an archive (the layout is still at 1: kv_version 1 runs).
	archive := tarball(t, v2, filepath.Join(src, "layoutext-2.0.0.tar.gz"))
	r = dd.oc(t, "extension", "install", "--yes", "--json", archive)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, archive, r.change(t).Record.Source)
	running("2.0.0")
	runnerKept("install from an archive")

	// With the daemon stopped, the recorded layout is read from the store
	// under the state lock: the downgrade is still refused.
	require.NoError(t, d.Stop())
	r = dd.oc(t, "extension", "update", "--yes", "--json", v1)
	assert.Equal(t, 1, r.code, r.stderr)
	assert.Equal(t, packages.Code("kv_downgrade"), r.change(t).Code)

	l, err := readLedger(t, d.ConfigDir)
	require.NoError(t, err)
	var ops []string
	for _, rec := range l.Records {
		ops = append(ops, rec.Op+" "+rec.Version)
	}
	assert.Equal(t, []string{"install 1.0.0", "update 1.1.0", "rollback 1.0.0", "update 2.0.0", "remove 2.0.0", "install 2.0.0"}, ops)
}

func readLedger(t *testing.T, config string) (packages.Ledger, error) {
	t.Helper()
	var l packages.Ledger
	data, err := os.ReadFile(filepath.Join(config, "extensions", packages.LedgerFile))
	if err != nil {
		return l, err
	}
	return l, json.Unmarshal(data, &l)
}

// crashUpdate runs `extension update` held where the old release is moved
// aside and the new one not yet renamed in, and kills it there (SIGKILL).
func crashUpdate(t *testing.T, dd dirs, source string) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "hold")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	cmd := exec.Command(daemonBinary(t), append([]string{"extension", "update", "--yes", source}, dd.flags()...)...)
	cmd.Env = append(os.Environ(), testHoldEnv+"="+packages.HoldDisplaced+"="+fifo)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	f, err := os.Open(fifo) // blocks until the command reaches the hold
	require.NoError(t, err)
	line, err := bufio.NewReader(f).ReadString('\n')
	f.Close()
	if err != nil || line != packages.HoldDisplaced+"\n" {
		// stderr is the command's to write until it has been waited for.
		cmd.Process.Kill()
		cmd.Wait()
		require.FailNowf(t, "the update did not reach the hold", "read %q (%v); stderr: %s", line, err, stderr.String())
	}
	assert.NoDirExists(t, filepath.Join(dd.config, "extensions", "layoutext"), "held at the moment no release is in place")
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
}

// TestACrashBetweenStagingAndRenameLeavesTheOldRelease: an update killed
// after the old release is moved aside and before the new one is renamed
// in leaves the old release working: the daemon's start recovers it, and
// so does the next packaging command.
func TestACrashBetweenStagingAndRenameLeavesTheOldRelease(t *testing.T) {
	bin := daemonBinary(t)
	src := t.TempDir()
	v1 := release(t, filepath.Join(src, "v1"), "layoutext", "1.0.0", 0)
	v2 := release(t, filepath.Join(src, "v2"), "layoutext", "2.0.0", 0)
	dd := dirs{daemontest.TempDir(t), daemontest.TempDir(t)}
	require.Equal(t, 0, dd.oc(t, "extension", "install", "--yes", v1).code)
	ledger := treeListing(t, dd.config)

	crashUpdate(t, dd, v2)
	d := daemontest.Start(t, daemontest.Options{Binary: bin, ConfigDir: dd.config, StateDir: dd.state})
	p, ok := pkgStatus(t, d.Client, "layoutext")
	require.True(t, ok, "the daemon finds the old release")
	assert.Equal(t, "1.0.0", p.Version)
	assert.Equal(t, "ready", p.State, p.LastError)
	require.NoError(t, d.Stop())
	assert.Equal(t, ledger, treeListing(t, dd.config), "nothing of the crashed update is left")

	crashUpdate(t, dd, v2)
	r := dd.oc(t, "extension", "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var entries []packages.Entry
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &entries))
	require.Len(t, entries, 1)
	assert.Equal(t, "1.0.0", entries[0].Version)
	assert.Equal(t, ledger, treeListing(t, dd.config))

	// The update then goes through.
	require.Equal(t, 0, dd.oc(t, "extension", "update", "--yes", v2).code)
	r = dd.oc(t, "extension", "inspect", "--json", "layoutext")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"version": "2.0.0"`)
}

// TestBundledDiscoveryFromTheReleaseLayout: `extension bundle` writes a
// binary and its bundled packages; that binary's daemon discovers them
// after the installed ones, an installed package of the same name
// replaces the bundled one, and removing it brings the bundled one back.
func TestBundledDiscoveryFromTheReleaseLayout(t *testing.T) {
	rel := daemontest.TempDir(t)
	r := oc(t, daemonBinary(t), nil, "extension", "bundle", "--json", rel)
	require.Equal(t, 0, r.code, r.stderr)
	var res bundleResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, bundledNames(), res.Packages)
	copyBin := filepath.Join(rel, "open-conduit")
	for _, name := range bundledNames() {
		assert.FileExists(t, filepath.Join(rel, "extensions", name, "open-conduit-extension.json"))
	}

	d := daemontest.Start(t, daemontest.Options{Binary: copyBin})
	for _, name := range bundledNames() {
		p, ok := pkgStatus(t, d.Client, name)
		require.True(t, ok, name)
		assert.Equal(t, client.OriginBundled, p.Origin, name)
		assert.Equal(t, "ready", p.State, "%s: %s", name, p.LastError)
		assert.Equal(t, filepath.Join(rel, "extensions", name), p.Dir)
	}
	agent, _ := pkgStatus(t, d.Client, "agent")
	flags := []string{"--config", d.ConfigDir, "--state", d.StateDir}

	// An installed notes replaces the bundled one.
	r = oc(t, copyBin, nil, append([]string{"extension", "install", "--yes", "../../extensions/notes"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	notes, _ := pkgStatus(t, d.Client, "notes")
	assert.Equal(t, client.OriginInstalled, notes.Origin)
	assert.Equal(t, "ready", notes.State, notes.LastError)
	r = oc(t, copyBin, nil, append([]string{"extension", "list"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^notes\s+3\.0\.0\s+installed \(replaces bundled\)\s+1\s+-\s+ready\s+0\s+-$`, r.stdout)
	assert.Regexp(t, `(?m)^runner\s+\S+\s+bundled\s+1\s+-\s+ready\s+0\s+-$`, r.stdout)

	// Removing it brings the bundled one back, and nothing else restarted.
	r = oc(t, copyBin, nil, append([]string{"extension", "remove", "--json"}, flags...)...)
	assert.Equal(t, exitUsage, r.code, "remove takes a name")
	r = oc(t, copyBin, nil, append([]string{"extension", "remove", "notes"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "the bundled notes is back")
	notes, _ = pkgStatus(t, d.Client, "notes")
	assert.Equal(t, client.OriginBundled, notes.Origin)
	assert.Equal(t, "ready", notes.State, notes.LastError)
	now, _ := pkgStatus(t, d.Client, "agent")
	assert.Equal(t, agent.PID, now.PID, "agent kept its process")

	// A package removed by hand, not reloaded, is listed as the daemon
	// still runs it.
	r = oc(t, copyBin, nil, append([]string{"extension", "install", "--yes", "../../extensions/notes"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, os.RemoveAll(filepath.Join(d.ConfigDir, "extensions", "notes")))
	r = oc(t, copyBin, nil, append([]string{"extension", "list", "--json"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	var entries []packages.Entry
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &entries))
	var gone *packages.Entry
	for i, e := range entries {
		if e.Name == "notes" && e.Origin == packages.OriginInstalled {
			gone = &entries[i]
		}
	}
	require.NotNil(t, gone, "%s", r.stdout)
	assert.Equal(t, "ready", gone.State)
	assert.Contains(t, gone.LastError, "not on disk any more")
}

// TestRemoveRefusesWhenTheBundledReleaseCannotRun: removing an installed
// release that migrated KV past the bundled release of its name is
// refused (the bundled one would be refused at start); --force removes it
// and the daemon reports the bundled one refused.
func TestRemoveRefusesWhenTheBundledReleaseCannotRun(t *testing.T) {
	rel := daemontest.TempDir(t)
	r := oc(t, daemonBinary(t), nil, "extension", "bundle", rel)
	require.Equal(t, 0, r.code, r.stderr)
	copyBin := filepath.Join(rel, "open-conduit")
	release(t, filepath.Join(rel, "extensions", "layoutext"), "layoutext", "1.0.0", 0)
	v2 := release(t, filepath.Join(t.TempDir(), "v2"), "layoutext", "2.0.0", 1)

	d := daemontest.Start(t, daemontest.Options{Binary: copyBin})
	p, _ := pkgStatus(t, d.Client, "layoutext")
	require.Equal(t, client.OriginBundled, p.Origin)
	flags := []string{"--config", d.ConfigDir, "--state", d.StateDir}
	r = oc(t, copyBin, nil, append([]string{"extension", "install", "--yes", v2}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	layouts, err := d.Client.KVLayouts(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, layouts["layoutext"], "the installed release migrated KV")

	r = oc(t, copyBin, nil, append([]string{"extension", "remove", "--json", "layoutext"}, flags...)...)
	assert.Equal(t, 1, r.code)
	assert.Equal(t, packages.Code("kv_downgrade"), r.change(t).Code)
	assert.Contains(t, r.stderr, "brings back the bundled release")
	p, _ = pkgStatus(t, d.Client, "layoutext")
	assert.Equal(t, "2.0.0", p.Version)
	assert.Equal(t, client.OriginInstalled, p.Origin)

	r = oc(t, copyBin, nil, append([]string{"extension", "remove", "--force", "layoutext"}, flags...)...)
	assert.Equal(t, 1, r.code, "the daemon cannot start what came back")
	p, _ = pkgStatus(t, d.Client, "layoutext")
	assert.Equal(t, client.OriginBundled, p.Origin)
	assert.Equal(t, "refused", p.State)
	assert.Contains(t, p.LastError, "older than the stored KV layout 1")
}
