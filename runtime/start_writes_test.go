package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/runtimetest"
)

// countingStore counts the write transactions that commit: each is one
// synced write on a durable store.
type countingStore struct {
	runtime.Store
	commits atomic.Int64
}

func (s *countingStore) Transact(ctx context.Context, fn func(runtime.Tx) error) error {
	err := s.Store.Transact(ctx, fn)
	if err == nil {
		s.commits.Add(1)
	}
	return err
}

// quietExecutor starts runs that never persist recovery metadata.
type quietExecutor struct{ parkedExecutor }

func (quietExecutor) Run(context.Context, runtime.RunRequest) (runtime.RunHandle, error) {
	return parkedHandle{}, nil
}

// An Execution start is two synced writes: the start transaction, then
// either the run's first recovery persist, which marks it running in the
// same transaction, or, for a run that persists nothing, the mark itself.
// It was three for a run that persisted (start, persist, mark running).
func TestExecutionStartWrites(t *testing.T) {
	for name, exec := range map[string]runtime.Executor{"persists": parkedExecutor{}, "persists nothing": quietExecutor{}} {
		t.Run(name, func(t *testing.T) {
			clock := runtimetest.NewFakeClock(t0)
			store := &countingStore{Store: openStore(t, clock)}
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
			before := store.commits.Load()
			xs, err := h.engine.StartPending(ctx)
			require.NoError(t, err)
			require.Len(t, xs, 1)
			assert.Equal(t, int64(2), store.commits.Load()-before, "synced writes for one start")
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
		})
	}
}
