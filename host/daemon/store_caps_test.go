package daemon

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// TestEngineStoreKeepsTheStoresCapabilities: the engine the daemon composes
// sees the SQLite store's pre-accept and deferred-sync capabilities through
// the notifying wrapper (hidden, a push took two commits and an Execution's
// start two synced writes in the daemon, whatever the benchmarks said), its
// transactions keep AcceptEventAt, and a deferred commit still notifies the
// change stream.
func TestEngineStoreKeepsTheStoresCapabilities(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	ns := newNotifyingStore(st)
	es := ns.engineStore()

	_, pre := es.(runtime.PreAcceptStore)
	assert.True(t, pre, "the engine's store is a PreAcceptStore")
	def, ok := es.(runtime.DeferredSyncStore)
	require.True(t, ok, "the engine's store is a DeferredSyncStore")
	_, seq := es.(runtime.CommittedSequenceStore)
	assert.True(t, seq, "the engine's store is a CommittedSequenceStore")

	ctx := context.Background()
	require.NoError(t, es.Transact(ctx, func(tx runtime.Tx) error {
		_, ok := tx.(runtime.PreAcceptTx)
		assert.True(t, ok, "a transaction keeps AcceptEventAt")
		return nil
	}))

	changed := ns.Changed()
	require.NoError(t, def.TransactDeferSync(ctx, func(runtime.Tx) error { return nil }))
	select {
	case <-changed:
	default:
		t.Fatal("a deferred commit did not notify the change stream")
	}
}

// TestEngineStoreClaimsNothingItLacks: over a store without the
// capabilities the engine gets the plain notifying store.
func TestEngineStoreClaimsNothingItLacks(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	es := newNotifyingStore(struct{ runtime.Store }{st}).engineStore()
	_, pre := es.(runtime.PreAcceptStore)
	_, def := es.(runtime.DeferredSyncStore)
	_, seq := es.(runtime.CommittedSequenceStore)
	assert.False(t, pre || def || seq)
}
