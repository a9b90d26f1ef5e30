package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// TestEngineStoreKeepsTheStartTx: the engine's transactions in the daemon
// keep the SQLite store's one-statement start (runtime.StartTx; hidden, a
// start in the daemon took the general path's reads), and a run its
// MarkRunning marks is journaled for the change stream as a PutExecution
// is (TestChangeStreamCarriesPackagesAndExecutions sees it end to end).
func TestEngineStoreKeepsTheStartTx(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	ns := newNotifyingStore(st)
	es := ns.engineStore()
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var started runtime.Execution
	require.NoError(t, es.Transact(ctx, func(tx runtime.Tx) error {
		_, ok := tx.(runtime.StartTx)
		require.True(t, ok, "a transaction keeps the StartTx")
		if _, err := tx.PutWork(runtime.Work{ID: "w-1", ScopeID: "s1", State: runtime.WorkRunning}); err != nil {
			return err
		}
		l, err := tx.AcquireLease(runtime.LeaseRequest{Name: "work/w-1", Holder: "engine", Now: now, TTL: time.Hour})
		if err != nil {
			return err
		}
		started, err = tx.PutExecution(runtime.Execution{ID: "x-1", WorkID: "w-1", Attempt: 1, Executor: "e",
			Lease: l.Name, Epoch: l.Epoch, State: runtime.ExecutionStarting})
		return err
	}))
	before := ns.journal.latest()
	require.NoError(t, es.(runtime.DeferredSyncStore).TransactDeferSync(ctx, func(tx runtime.Tx) error {
		_, marked, err := tx.(runtime.StartTx).MarkRunning(started, []byte(`{"run":1}`))
		require.True(t, marked)
		return err
	}))
	changes := ns.journal.after(before)
	require.Len(t, changes, 1, "the mark is journaled")
	require.Equal(t, client.ChangeExecution, changes[0].Kind)
	x := changes[0].Execution
	assert.Equal(t, "x-1", x.ID)
	assert.Equal(t, string(runtime.ExecutionRunning), x.State)
	assert.Equal(t, "s1", x.ScopeID)
	assert.Equal(t, int64(1), x.Epoch)
}
