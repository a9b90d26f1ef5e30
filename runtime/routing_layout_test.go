package runtime_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

// A store routed before the routing namespace kept records by sequence
// has its cursor under "cursor" and each record under "route\x00<event
// ID>": routing goes on from that cursor, the old records still read,
// and the first routing commit drops the old cursor.
func TestRoutingGoesOnFromTheLayoutBefore(t *testing.T) {
	ctx := context.Background()
	h := routingHarness(t, &keyedHandler{})
	old := accept(t, h, testEnvelope("src", "1", "s1", payload{Match: true, Key: "k1"}),
		testEnvelope("src", "2", "s1", payload{Match: true, Key: "k2"}))
	oldRecord, err := json.Marshal(runtime.RouteRecord{EventID: old[0].ID, Disposition: runtime.DispositionUnmatched, Route: -1, Reason: "routed before"})
	require.NoError(t, err)
	require.NoError(t, h.store.Transact(ctx, func(tx runtime.Tx) error {
		return tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{
			{Namespace: runtime.NamespaceRouting, Key: "route\x00" + old[0].ID, Value: oldRecord},
			{Namespace: runtime.NamespaceRouting, Key: "route\x00" + old[1].ID, Value: oldRecord},
			{Namespace: runtime.NamespaceRouting, Key: "cursor", Value: []byte("2")},
		}})
	}))
	cursor, err := h.engine.RoutingCursor(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), cursor)
	rec := record(t, h, old[0].ID)
	assert.Equal(t, "routed before", rec.Reason)

	next := accept(t, h, testEnvelope("src", "3", "s1", payload{Match: true, Key: "k3"}))
	n, err := h.engine.RoutePending(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "only the Event after the old cursor")
	assert.Equal(t, runtime.DispositionCreated, record(t, h, next[0].ID).Disposition)
	cursor, err = h.engine.RoutingCursor(ctx)
	require.NoError(t, err)
	assert.Equal(t, next[0].Sequence, cursor)
	h.view(t, func(r runtime.ReadTx) error {
		_, found, err := r.KVGet(runtime.NamespaceRouting, "cursor")
		assert.False(t, found, "the old cursor is dropped")
		return err
	})
	_, err = h.engine.RouteRecordOf(ctx, "ev-unknown")
	assert.ErrorIs(t, err, runtime.ErrNotFound)
}

// The same store pushed to: the push routed in its commit reads the old
// cursor (it is not where this layout keeps it) and drops it; the pushes
// after it read no cursor at all.
func TestPushGoesOnFromTheLayoutBefore(t *testing.T) {
	ctx := context.Background()
	h, vs := newSequenceHarness(t, false)
	old := accept(t, h, testEnvelope("src", "1", "s1", payload{Match: true, Key: "k1"}))
	require.NoError(t, vs.Transact(ctx, func(tx runtime.Tx) error {
		return tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{
			{Namespace: runtime.NamespaceRouting, Key: "cursor", Value: []byte("1")},
		}})
	}))
	first := pushKeys(t, h, "d1", "k2")
	cursor, err := h.engine.RoutingCursor(ctx)
	require.NoError(t, err)
	assert.Equal(t, first[0].Sequence, cursor, "routed in its commit, after the old cursor")
	h.view(t, func(r runtime.ReadTx) error {
		_, found, err := r.KVGet(runtime.NamespaceRouting, "cursor")
		assert.False(t, found, "the old cursor is dropped")
		return err
	})
	next := pushKeys(t, h, "d2", "k3")
	cursor, err = h.engine.RoutingCursor(ctx)
	require.NoError(t, err)
	assert.Equal(t, next[0].Sequence, cursor)
	_, err = h.engine.RouteRecordOf(ctx, old[0].ID)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "the Event before the old cursor was never routed here")
}
