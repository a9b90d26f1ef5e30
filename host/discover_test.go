package host_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
)

func writeManifest(t *testing.T, root, dir string, manifest []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(root, dir), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, dir, protocol.ManifestFile), manifest, 0o644))
}

func TestDiscoverReportsAndSkipsBadPackages(t *testing.T) {
	root := t.TempDir()
	writeManifest(t, root, "good", manifestJSON("good", "good", nil, nil))
	writeManifest(t, root, "misnamed", manifestJSON("other", "good", nil, nil))
	writeManifest(t, root, "broken", []byte(`{"name": "broken",`))
	writeManifest(t, root, "newer", manifestJSON("newer", "good", nil, map[string]any{"flux": true}))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "empty"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "file"), nil, 0o644))

	pkgs, problems, err := host.Discover(root)
	require.NoError(t, err)
	require.Len(t, pkgs, 1)
	assert.Equal(t, "good", pkgs[0].Name)
	assert.Equal(t, filepath.Join(root, "good"), pkgs[0].Dir)
	names := map[string]error{}
	for _, p := range problems {
		names[p.Name] = p.Err
	}
	require.Len(t, names, 3)
	assert.ErrorIs(t, names["misnamed"], host.ErrMisnamed)
	assert.ErrorIs(t, names["broken"], protocol.ErrInvalidManifest)
	assert.ErrorIs(t, names["newer"], protocol.ErrNewerManifest)
}

func TestDiscoverMissingRootIsNone(t *testing.T) {
	pkgs, problems, err := host.Discover(filepath.Join(t.TempDir(), "absent"))
	require.NoError(t, err)
	assert.Empty(t, pkgs)
	assert.Empty(t, problems)
}

func TestInstalledReplacesBundledEvenWhenRefused(t *testing.T) {
	installed, bundled := t.TempDir(), t.TempDir()
	writeManifest(t, bundled, "alpha", manifestJSON("alpha", "good", nil, nil))
	writeManifest(t, bundled, "beta", manifestJSON("beta", "good", nil, nil))
	writeManifest(t, bundled, "gamma", manifestJSON("gamma", "good", nil, nil))
	writeManifest(t, installed, "alpha", manifestJSON("alpha", "good", nil, map[string]any{"version": "2.0.0"}))
	writeManifest(t, installed, "beta", manifestJSON("beta", "good", nil, map[string]any{"needs_newer": 1}))

	pkgs, problems, err := host.DiscoverAll(installed, bundled)
	require.NoError(t, err)
	got := map[string]host.Package{}
	for _, p := range pkgs {
		got[p.Name] = p
	}
	require.Len(t, got, 2)
	assert.Equal(t, "2.0.0", got["alpha"].Manifest.Version)
	assert.False(t, got["alpha"].Bundled)
	assert.True(t, got["gamma"].Bundled)
	require.Len(t, problems, 1, "the refused installed beta is reported, not swapped for the bundled one")
	assert.Equal(t, "beta", problems[0].Name)
	assert.False(t, problems[0].Bundled)
}

func TestBundledRootIsBesideTheResolvedExecutable(t *testing.T) {
	root, err := host.BundledRoot()
	require.NoError(t, err)
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	assert.Equal(t, filepath.Join(filepath.Dir(exe), "extensions"), root)
}

func pkg(t *testing.T, name string, provides map[string]any) host.Package {
	m, err := protocol.ParseManifest(manifestJSON(name, "good", provides, nil))
	require.NoError(t, err)
	return host.Package{Name: name, Manifest: m}
}

func TestCheckConflicts(t *testing.T) {
	a := pkg(t, "notes", nil)
	b := pkg(t, "tasks", nil)
	require.NoError(t, host.CheckConflicts([]host.Package{a, b}, nil))

	// The same package twice claims every one of its names twice.
	err := host.CheckConflicts([]host.Package{a, pkg(t, "notes", nil), b}, nil)
	require.ErrorIs(t, err, host.ErrConflictingNames)
	for _, k := range []host.Kind{host.KindName, host.KindConfigType, host.KindHandler, host.KindFamily,
		host.KindWorkKind, host.KindRecurrence, host.KindSchema} {
		assert.Contains(t, err.Error(), string(k)+" ", k)
	}

	// "notes" declares a type "notes-x"; a package named "notes-x" takes it as its own.
	x := pkg(t, "notes", map[string]any{"extensions": []any{map[string]any{"type": "notes-x"}}})
	y := pkg(t, "notes-x", map[string]any{"extensions": []any{map[string]any{"type": "notes-x"}}})
	err = host.CheckConflicts([]host.Package{x, y}, nil)
	require.ErrorIs(t, err, host.ErrConflictingNames)
	assert.Contains(t, err.Error(), `config type "notes-x"`)

	// Executors, resource types and operations, and the host's own names.
	e1 := pkg(t, "run", map[string]any{"executors": []any{map[string]any{"name": "run-x", "labels": map[string]any{}, "controls": map[string]any{}}},
		"resources": []any{map[string]any{"type": "run-x"}}, "operations": []any{map[string]any{"name": "run.op", "kind": "handler"}}})
	e2 := pkg(t, "run-x", map[string]any{"executors": []any{map[string]any{"name": "run-x", "labels": map[string]any{}, "controls": map[string]any{}}},
		"resources": []any{map[string]any{"type": "run-x"}}})
	err = host.CheckConflicts([]host.Package{e1, e2}, host.HostNames{host.KindOperation: {"run.op"}})
	require.ErrorIs(t, err, host.ErrConflictingNames)
	assert.Contains(t, err.Error(), `executor "run-x"`)
	assert.Contains(t, err.Error(), `resource type "run-x"`)
	assert.Contains(t, err.Error(), `operation "run.op" is claimed by open-conduit and run`)
	assert.Error(t, host.CheckConflicts([]host.Package{a}, host.HostNames{host.KindHandler: {"notes"}}))
}
