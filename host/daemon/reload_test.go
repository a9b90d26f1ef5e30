package daemon

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/host"
)

// installMinimal copies the minimal packages into <config>/extensions.
func installMinimal(t *testing.T, config string, pkgs []host.Package) {
	t.Helper()
	for _, p := range pkgs {
		dst := filepath.Join(installRoot(config), p.Name)
		require.NoError(t, os.MkdirAll(dst, 0o755))
		for _, f := range []string{"minimalext", "open-conduit-extension.json"} {
			require.NoError(t, os.Link(filepath.Join(p.Dir, f), filepath.Join(dst, f)))
		}
	}
}

// TestReloadPackagesChangesOnlyWhatChanged: a reload stops a removed
// package, restarts a changed one, starts a new one and leaves the
// others' processes alone, while status is read all the while (run it
// with -race: the package set is swapped under its lock).
func TestReloadPackagesChangesOnlyWhatChanged(t *testing.T) {
	pkgs := minimalPackages(t, 4, "minimal")
	config, state := t.TempDir(), t.TempDir()
	installMinimal(t, config, pkgs[:2]) // p01, p02
	installMinimal(t, config, pkgs[3:]) // p04
	ctx := context.Background()
	d, err := Open(ctx, Options{ConfigDir: config, StateDir: state, NoAPI: true})
	require.NoError(t, err)
	defer d.Close(ctx)
	kept, _, ok := d.Package("p04")
	require.True(t, ok)
	gone, _, _ := d.Package("p01")

	require.NoError(t, os.RemoveAll(filepath.Join(installRoot(config), "p01")))
	installMinimal(t, config, pkgs[2:3]) // p03
	manifest := filepath.Join(installRoot(config), "p02", "open-conduit-extension.json")
	require.NoError(t, os.Remove(manifest)) // a hard link: replace, not write through
	require.NoError(t, os.WriteFile(manifest, []byte(`{"name": "p02", "version": "2", "command": ["minimalext", "minimal"], "protocol": [1], "provides": {}}`), 0o644))

	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				_ = d.Status(ctx)
				_ = d.Doctor(ctx, false)
			}
		}
	})
	res, err := d.ReloadPackages(ctx, nil)
	close(stop)
	readers.Wait()
	require.NoError(t, err)
	assert.Equal(t, []string{"p03"}, res.Started)
	assert.Equal(t, []string{"p02"}, res.Restarted)
	assert.Equal(t, []string{"p01"}, res.Stopped)
	assert.Equal(t, []string{"p04"}, res.Unchanged)

	now, _, ok := d.Package("p04")
	require.True(t, ok)
	assert.Same(t, kept, now, "an unchanged package keeps its process")
	st, _, _ := gone.Status()
	assert.Equal(t, host.Closed, st, "a removed package's process is stopped")
	versions := map[string]string{}
	for _, p := range d.Status(ctx).Packages {
		versions[p.Name] = p.Version + " " + p.State
	}
	assert.Equal(t, map[string]string{"p02": "2 ready", "p03": "1 ready", "p04": "1 ready"}, versions)

	// Naming a package restarts it though its manifest reads the same.
	res, err = d.ReloadPackages(ctx, []string{"p04"})
	require.NoError(t, err)
	assert.Equal(t, []string{"p04"}, res.Restarted)
	assert.ElementsMatch(t, []string{"p02", "p03"}, res.Unchanged)
	now, _, _ = d.Package("p04")
	assert.NotSame(t, kept, now)
}

func TestReloadRefusesAFixedPackageSet(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, Options{ConfigDir: t.TempDir(), StateDir: t.TempDir(), NoAPI: true, Packages: []host.Package{}})
	require.NoError(t, err)
	defer d.Close(ctx)
	_, err = d.ReloadPackages(ctx, nil)
	assert.ErrorContains(t, err, "fixed set of packages")
}

// TestReloadRouteRefusesBadRequests: a name that is no package name is
// invalid_request before anything is reloaded; a backend that reloads
// nothing answers unavailable.
func TestReloadRouteRefusesBadRequests(t *testing.T) {
	_, c := newAPITest(t)
	ctx := t.Context()
	_, err := c.ReloadPackages(ctx, []string{"../etc"})
	assert.ErrorIs(t, err, client.ErrInvalidRequest)
	_, err = c.ReloadPackages(ctx, []string{"notes"})
	assert.ErrorIs(t, err, client.ErrUnavailable)
	_, err = c.KVLayouts(ctx)
	assert.ErrorIs(t, err, client.ErrUnavailable)
}
