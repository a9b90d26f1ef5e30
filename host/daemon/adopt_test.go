package daemon

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

const runnerConfig = `{"scopes": [{"id": "home", "bindings": [{"name": "jobs", "executor": "runner"}]}]}`

// openRunnerDaemon opens a daemon on dirs with runner installed and
// runnerConfig applied.
func openRunnerDaemon(t *testing.T, cfgDir, state string) *Daemon {
	t.Helper()
	d, err := Open(t.Context(), Options{ConfigDir: cfgDir, StateDir: state, Executable: openConduitBinary(t), NoAPI: true,
		ShutdownGrace: 2 * time.Second})
	require.NoError(t, err)
	require.Equal(t, int64(1), d.Generation().Number)
	return d
}

func execution(t *testing.T, d *Daemon, workID string) runtime.Execution {
	t.Helper()
	var xs []runtime.Execution
	require.NoError(t, d.Store().View(t.Context(), func(r runtime.ReadTx) error {
		var err error
		xs, err = r.Executions(workID)
		return err
	}))
	require.NotEmpty(t, xs)
	return xs[len(xs)-1]
}

// A daemon shut down with an execution running releases its lease; the
// next daemon on the state directory adopts the run through
// executor.recover (the job never stopped), and the run ends as it would
// have.
func TestRestartedDaemonAdoptsRunningExecution(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfgDir, state := runnerDirs(t, runnerConfig)

	d := openRunnerDaemon(t, cfgDir, state)
	require.NoError(t, d.Store().Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutWork(runtime.Work{ID: "w1", ScopeID: "home", Kind: "job", Binding: bindingName("home", "jobs"), State: runtime.WorkPending})
		return err
	}))
	started, err := d.Engine().StartPending(ctx)
	require.NoError(t, err)
	require.Len(t, started, 1)
	before := execution(t, d, "w1")
	require.Equal(t, runtime.ExecutionRunning, before.State)
	require.NotEmpty(t, before.Recovery, "the runner persisted its recovery metadata")

	require.NoError(t, d.Close(ctx))
	var lease runtime.Lease
	st, err := sqlite.Open(storeDir(state))
	require.NoError(t, err)
	require.NoError(t, st.View(ctx, func(r runtime.ReadTx) error {
		var err error
		lease, err = r.Lease(before.Lease)
		return err
	}))
	require.NoError(t, st.Close())
	assert.True(t, lease.Released, "shutdown released the running execution's lease")

	d = openRunnerDaemon(t, cfgDir, state)
	defer d.Close(context.WithoutCancel(ctx))
	after := execution(t, d, "w1")
	assert.Equal(t, before.ID, after.ID, "the same execution, adopted, not a new attempt")
	assert.Greater(t, after.Epoch, before.Epoch, "under a new epoch")
	require.NoError(t, d.Store().View(ctx, func(r runtime.ReadTx) error {
		var err error
		lease, err = r.Lease(after.Lease)
		return err
	}))
	assert.False(t, lease.Released, "the new daemon holds it")

	// The job still runs: the injected status ends it, and the Work with it.
	require.NoError(t, d.Engine().Inject(ctx, after.ID, json.RawMessage(`"0\n"`)))
	d.Engine().Drain()
	var w runtime.Work
	require.NoError(t, d.Store().View(ctx, func(r runtime.ReadTx) error {
		var err error
		w, err = r.Work("w1")
		return err
	}))
	assert.Equal(t, runtime.WorkDone, w.State)
	assert.Equal(t, runtime.ExecutionSucceeded, execution(t, d, "w1").State)
}

// shortDir is a temporary directory with a short path.
func shortDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "oc")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// An execution running when a new generation is applied goes on under
// the same observer: the runner's process is configured again, not
// restarted, and the run ends as it would have.
func TestHotApplyKeepsRunningExecutions(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfgDir, state := runnerDirs(t, runnerConfig)
	d := openRunnerDaemon(t, cfgDir, state)
	defer d.Close(context.WithoutCancel(ctx))
	proc, _, _ := d.Package("runner")
	procGen := proc.Generation()

	require.NoError(t, d.Store().Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutWork(runtime.Work{ID: "w1", ScopeID: "home", Kind: "job", Binding: bindingName("home", "jobs"), State: runtime.WorkPending})
		return err
	}))
	started, err := d.Engine().StartPending(ctx)
	require.NoError(t, err)
	require.Len(t, started, 1)

	gen, ds, err := d.ApplyConfig(ctx, []byte(`{"scopes": [{"id": "home", "title": "renamed", "bindings": [{"name": "jobs", "executor": "runner"}]}, {"id": "more"}]}`))
	require.NoError(t, err)
	require.Empty(t, ds)
	assert.Equal(t, int64(2), gen.Number)
	assert.Equal(t, procGen, proc.Generation(), "configured again, not restarted")

	require.NoError(t, d.Engine().Inject(ctx, started[0].ID, json.RawMessage(`"0\n"`)))
	d.Engine().Drain()
	x := execution(t, d, "w1")
	assert.Equal(t, started[0].ID, x.ID)
	assert.Equal(t, started[0].Epoch, x.Epoch, "never re-adopted: the same observer saw it end")
	assert.Equal(t, runtime.ExecutionSucceeded, x.State)
}
