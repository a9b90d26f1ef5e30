package runtime_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/runtimetest"
)

// countingStore counts the write transactions that commit: synced ones
// (commits), each one synced write on a durable store, and deferred-sync
// ones (deferred). It passes the SQLite store's optional interfaces on.
type countingStore struct {
	runtime.Store
	commits, deferred atomic.Int64
}

var (
	_ runtime.DeferredSyncStore = (*countingStore)(nil)
	_ runtime.PreAcceptStore    = (*countingStore)(nil)
)

func (s *countingStore) Transact(ctx context.Context, fn func(runtime.Tx) error) error {
	err := s.Store.Transact(ctx, fn)
	if err == nil {
		s.commits.Add(1)
	}
	return err
}

func (s *countingStore) TransactDeferSync(ctx context.Context, fn func(runtime.Tx) error) error {
	err := s.Store.(runtime.DeferredSyncStore).TransactDeferSync(ctx, fn)
	if err == nil {
		s.deferred.Add(1)
	}
	return err
}

func (s *countingStore) Now() time.Time { return s.Store.(runtime.PreAcceptStore).Now() }

// quietExecutor starts runs that never persist recovery metadata.
type quietExecutor struct{ parkedExecutor }

func (quietExecutor) Run(context.Context, runtime.RunRequest) (runtime.RunHandle, error) {
	return parkedHandle{}, nil
}

// An Execution start is one synced write, the start transaction (the
// intent), and one deferred-sync write after the executor's start: either
// the run's first recovery persist, which marks it running in the same
// transaction, or, for a run that persists nothing, the mark itself. It
// was three synced writes (start, persist, mark running), then two.
//
// It holds on both paths of the mark: the store's one fenced UPDATE
// (runtime.StartTx) and, for a Tx without it, reading and putting
// the Execution.
func TestExecutionStartWrites(t *testing.T) {
	for _, path := range []string{"marker", "general path"} {
		for name, exec := range map[string]runtime.Executor{"persists": parkedExecutor{}, "persists nothing": quietExecutor{}} {
			t.Run(path+"/"+name, func(t *testing.T) { testExecutionStartWrites(t, path == "marker", exec) })
		}
	}
}

func testExecutionStartWrites(t *testing.T, marker bool, exec runtime.Executor) {
	name := "persists nothing"
	if _, ok := exec.(parkedExecutor); ok {
		name = "persists"
	}
	clock := runtimetest.NewFakeClock(t0)
	var under runtime.Store = openStore(t, clock)
	if !marker {
		under = markerHidingStore{under}
	}
	store := &countingStore{Store: under}
	h := attach(t, runtime.Config{
		Store:     store,
		Bindings:  map[string]runtime.Binding{"b": {Executor: "x"}},
		Executors: map[string]runtime.Executor{"x": exec},
	}, clock)
	ctx := context.Background()
	require.NoError(t, store.Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutWork(runtime.Work{ID: "w1", ScopeID: "s1", Kind: "task", Binding: "b", State: runtime.WorkPending})
		return err
	}))
	before, deferredBefore := store.commits.Load(), store.deferred.Load()
	xs, err := h.engine.StartPending(ctx)
	require.NoError(t, err)
	require.Len(t, xs, 1)
	assert.Equal(t, int64(1), store.commits.Load()-before, "synced writes for one start")
	assert.Equal(t, int64(1), store.deferred.Load()-deferredBefore, "deferred-sync writes for one start")
	assert.Equal(t, runtime.ExecutionRunning, xs[0].State)

	var stored runtime.Execution
	h.view(t, func(r runtime.ReadTx) error {
		var err error
		stored, err = r.Execution(xs[0].ID)
		return err
	})
	assert.Equal(t, runtime.ExecutionRunning, stored.State)
	assert.Equal(t, xs[0].Epoch, stored.Epoch)
	if name == "persists" {
		assert.JSONEq(t, `{"run":"`+xs[0].ID+`"}`, string(stored.Recovery))
	} else {
		assert.Empty(t, stored.Recovery)
	}
	assert.Equal(t, runtime.WorkRunning, h.work(t, "w1").State)
}

// markerHidingStore gives its transactions a Tx without the store's
// StartTx, as a wrapper that embeds runtime.Tx does, so the
// engine takes the general path.
type markerHidingStore struct{ runtime.Store }

type plainTx struct{ runtime.Tx }

func (s markerHidingStore) Transact(ctx context.Context, fn func(runtime.Tx) error) error {
	return s.Store.Transact(ctx, func(tx runtime.Tx) error { return fn(plainTx{tx}) })
}

func (s markerHidingStore) TransactDeferSync(ctx context.Context, fn func(runtime.Tx) error) error {
	return s.Store.(runtime.DeferredSyncStore).TransactDeferSync(ctx, func(tx runtime.Tx) error { return fn(plainTx{tx}) })
}

func (s markerHidingStore) Now() time.Time { return s.Store.(runtime.PreAcceptStore).Now() }

// losingStore models a machine crash before a deferred-sync commit
// reached the disk: its TransactDeferSync runs fn and reports success,
// but keeps nothing.
type losingStore struct{ runtime.Store }

var errLost = errors.New("lost with the machine")

func (s losingStore) TransactDeferSync(ctx context.Context, fn func(runtime.Tx) error) error {
	err := s.Store.Transact(ctx, func(tx runtime.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errLost
	})
	if errors.Is(err, errLost) {
		return nil
	}
	return err
}

// The start's deferred write (the run's metadata, marking it running) is
// the one a machine crash can lose. What is left is the intent alone, an
// Execution starting without metadata, and the engine after the restart
// does what the crash table says for it: not adoptable, so the run is
// stopped (never recovered) and the Work retried.
func TestStartWhoseDeferredWriteIsLostIsStoppedAndRetried(t *testing.T) {
	ctx := context.Background()
	ex := newFakeExecutor()
	ex.persist, ex.recoverOK = true, true
	cfg := schedulerConfig(ex)
	clock := runtimetest.NewFakeClock(t0)
	cfg.Store = losingStore{openStore(t, clock)}
	old := attach(t, cfg, clock)
	w := newWork(t, old, "1", "k1")
	start(t, old)
	req := <-ex.started
	// Ended whatever the test finds, so no observer outlives it.
	t.Cleanup(func() { ex.finish(req.ExecutionID, runtime.RunResult{State: runtime.ExecutionStopped}) })

	xs := old.executions(t, w.ID)
	require.Len(t, xs, 1)
	require.Equal(t, runtime.ExecutionStarting, xs[0].State, "the intent is all that was kept")
	require.Empty(t, xs[0].Recovery)

	cfg.Holder = "restarted"
	fresh := attach(t, cfg, clock)
	adopted, err := fresh.engine.Adopt(ctx)
	require.NoError(t, err)
	require.Len(t, adopted, 1)
	assert.Equal(t, req.ExecutionID, <-ex.stopped, "stopped before any retry")
	fresh.engine.Drain()
	assert.Empty(t, drained(ex.recovered), "nothing to recover from")
	xs = fresh.executions(t, w.ID)
	require.Len(t, xs, 1)
	assert.Equal(t, runtime.ExecutionStopped, xs[0].State)
	assert.ErrorContains(t, errors.New(xs[0].Error), "not adoptable")
	assert.Equal(t, runtime.WorkPending, fresh.work(t, w.ID).State, "retried")
	old.engine.Drain()
}
