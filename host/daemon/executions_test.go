package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/runtimetest"
)

// The daemon renews a running execution's lease on its clock: after
// several hours of a fake clock (the engine's lease lasts one), the
// runner's job still holds its lease at its epoch, and the run ends as
// it would have.
func TestDaemonRenewsARunningExecutionsLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfgDir, state := runnerDirs(t, runnerConfig)
	clock := runtimetest.NewFakeClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	d, err := Open(ctx, Options{ConfigDir: cfgDir, StateDir: state, Executable: openConduitBinary(t), NoAPI: true,
		ShutdownGrace: 2 * time.Second, Clock: clock})
	require.NoError(t, err)
	defer d.Close(context.WithoutCancel(ctx))

	require.NoError(t, d.Store().Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutWork(runtime.Work{ID: "w1", ScopeID: "home", Kind: "job", Binding: bindingName("home", "jobs"), State: runtime.WorkPending})
		return err
	}))
	started, err := d.Engine().StartPending(ctx)
	require.NoError(t, err)
	require.Len(t, started, 1)
	x := execution(t, d, "w1")
	lease := func() runtime.Lease {
		var l runtime.Lease
		require.NoError(t, d.Store().View(ctx, func(r runtime.ReadTx) error {
			var err error
			l, err = r.Lease(x.Lease)
			return err
		}))
		return l
	}
	require.Equal(t, clock.Now().Add(time.Hour), lease().ExpiresAt)

	for range 12 { // four hours, in steps of the renewal interval
		clock.Advance(20 * time.Minute)
		l := lease()
		require.Equal(t, clock.Now().Add(time.Hour), l.ExpiresAt, "renewed at %s", clock.Now())
		require.Equal(t, x.Epoch, l.Epoch)
		require.False(t, l.Released)
	}
	require.NoError(t, d.Engine().Inject(ctx, x.ID, json.RawMessage(`"0\n"`)))
	waitSettled(t, d, "w1")
	assert.Equal(t, runtime.ExecutionSucceeded, execution(t, d, "w1").State)
	assert.True(t, lease().Released)
}

// runnerDirs makes a configuration directory holding the runner package
// and the config document doc, and a state directory beside it.
func runnerDirs(t *testing.T, doc string) (cfgDir, state string) {
	t.Helper()
	cfgDir, state = t.TempDir(), shortDir(t)
	require.NoError(t, os.MkdirAll(filepath.Join(cfgDir, "extensions", "runner"), 0o755))
	m, err := os.ReadFile("../../extensions/runner/open-conduit-extension.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, "extensions", "runner", "open-conduit-extension.json"), m, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, ConfigFile), []byte(doc), 0o600))
	return cfgDir, state
}
