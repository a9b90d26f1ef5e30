package host_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// fencedPersister stands in for the engine's lease-fenced persistence.
type fencedPersister struct {
	mu      sync.Mutex
	got     []string
	refused bool
}

func (f *fencedPersister) persist(_ context.Context, md json.RawMessage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refused {
		return runtime.ErrConflict
	}
	f.got = append(f.got, string(md))
	return nil
}

func (f *fencedPersister) persisted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...)
}

func runRequest(workID string, p *fencedPersister) runtime.RunRequest {
	return runtime.RunRequest{ExecutionID: "x-" + workID, Attempt: 1, Epoch: 1,
		Work: runtime.Work{ID: workID, ScopeID: "s1", Kind: "k", State: runtime.WorkRunning}, PersistRecovery: p.persist}
}

func runnerConns(t *testing.T, f func(t *testing.T, conn host.Conn, fx *fixture)) {
	extensionBothWays(t, "runx", manifestJSON("runx", "sdk-runner", runnerProvides("runx"), nil), runnerExtension, f)
}

func TestAdapterExecutorRunsAndControls(t *testing.T) {
	runnerConns(t, func(t *testing.T, conn host.Conn, fx *fixture) {
		ctx := ctxT(t)
		ex := host.NewRemote(conn).Executor("runx")
		var p fencedPersister
		h, err := ex.Run(ctx, runRequest("w-persist", &p))
		require.NoError(t, err)
		assert.Equal(t, []string{`{"adoptable":true,"work":"w-persist"}`}, p.persisted(), "persisted through the fenced function")

		live, err := ex.(runtime.Liver).Live(ctx, "x-w-persist", 10)
		require.NoError(t, err)
		assert.Contains(t, string(live), `"out"`)
		att, err := ex.(runtime.Attacher).Attach(ctx, "x-w-persist")
		require.NoError(t, err)
		assert.Contains(t, string(att), `"attach"`)
		require.NoError(t, ex.(runtime.Interrupter).Interrupt(ctx, "x-w-persist"))
		res, err := h.Wait(ctx)
		require.NoError(t, err)
		assert.Equal(t, runtime.ExecutionStopped, res.State)

		// Resume is not declared: unsupported, without a call.
		_, err = ex.(runtime.Resumer).Resume(ctx, runRequest("w-x", &p), nil)
		assert.ErrorIs(t, err, runtime.ErrUnsupported)
		// A run returning its recovery has it persisted by the host.
		var p2 fencedPersister
		h2, err := ex.Run(ctx, runRequest("w-result", &p2))
		require.NoError(t, err)
		assert.Len(t, p2.persisted(), 1)
		require.NoError(t, ex.(runtime.Stopper).Stop(ctx, "x-w-result", 1))
		res, err = h2.Wait(ctx)
		require.NoError(t, err)
		assert.Equal(t, runtime.ExecutionStopped, res.State)
	})
}

// TestAdapterExecutorPersistRefusalPropagates: when the host's fenced
// persistence refuses (a superseded lease), Run fails with the host's own
// error, as in process.
func TestAdapterExecutorPersistRefusalPropagates(t *testing.T) {
	runnerConns(t, func(t *testing.T, conn host.Conn, fx *fixture) {
		ex := host.NewRemote(conn).Executor("runx")
		p := &fencedPersister{refused: true}
		_, err := ex.Run(ctxT(t), runRequest("w-refused", p))
		require.ErrorIs(t, err, runtime.ErrConflict)
	})
}

// TestFaultExecutorRecoveredAcrossRestart: the extension crashes while the
// host observes a run; the host restarts it, adopts the run on the new
// process with executor.recover and the metadata persisted through the
// fence, and the observation ends with the run's own result.
func TestFaultExecutorRecoveredAcrossRestart(t *testing.T) {
	fx := newFixture(t)
	p, _ := fx.process("runx", manifestJSON("runx", "sdk-runner", runnerProvides("runx"), nil), func(c *host.Config) {
		c.Configure = func() protocol.ConfigureParams { return protocol.ConfigureParams{} }
	})
	require.NoError(t, p.Start(ctxT(t)))
	ex := host.NewRemote(p).Executor("runx")
	var fp fencedPersister
	h, err := ex.Run(ctxT(t), runRequest("w-persist", &fp))
	require.NoError(t, err)
	done := make(chan error, 1)
	var res runtime.RunResult
	go func() {
		var err error
		res, err = h.Wait(ctxT(t))
		done <- err
	}()
	// The crash: the process exits mid-call.
	require.Error(t, ex.(runtime.Injector).Inject(ctxT(t), "x-w-persist", json.RawMessage(`"crash"`)))
	require.NoError(t, fx.clock.WaitForRequests(ctxT(t), 1))
	fx.clock.Advance(host.BackoffMin)
	require.NoError(t, <-done)
	assert.Equal(t, runtime.ExecutionSucceeded, res.State, "adopted by the restarted process")
	assert.Equal(t, uint64(2), p.Generation())

	// A run that persisted nothing cannot be adopted: ErrExecutorCrashed.
	var none fencedPersister
	h, err = ex.Run(ctxT(t), runRequest("w-nothing", &none))
	require.NoError(t, err)
	go func() {
		_, err := h.Wait(ctxT(t))
		done <- err
	}()
	require.Error(t, ex.(runtime.Injector).Inject(ctxT(t), "x-w-nothing", json.RawMessage(`"crash"`)))
	require.NoError(t, fx.clock.WaitForRequests(ctxT(t), 2))
	fx.clock.Advance(2 * host.BackoffMin)
	assert.ErrorIs(t, <-done, runtime.ErrExecutorCrashed)

	// Recover with metadata the executor cannot adopt: ErrNotAdoptable.
	_, err = ex.Recover(ctxT(t), runtime.RecoverRequest{ExecutionID: "x-old", Attempt: 1, Epoch: 2,
		Work: runtime.Work{ID: "w-old"}, Recovery: json.RawMessage(`{"adoptable":false}`), PersistRecovery: none.persist})
	assert.ErrorIs(t, err, runtime.ErrNotAdoptable)
}
