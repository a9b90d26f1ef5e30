package runtime_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

// pageSource answers every scan with page, or, when hang is set, waits
// for its context to end.
type pageSource struct {
	page runtime.ReconcilePage
	hang bool
}

func (s *pageSource) Push(context.Context, runtime.Delivery) ([]runtime.Envelope, error) {
	return nil, runtime.ErrUnsupported
}

func (s *pageSource) Reconcile(ctx context.Context, _ runtime.ReconcileRequest) (runtime.ReconcilePage, error) {
	if s.hang {
		<-ctx.Done()
		return runtime.ReconcilePage{}, ctx.Err()
	}
	return s.page, nil
}

func observations(n, payloadBytes int) []runtime.Observation {
	body, _ := json.Marshal(map[string]string{"body": strings.Repeat("x", payloadBytes)})
	out := make([]runtime.Observation, n)
	for i := range out {
		item := "item-" + string(rune('a'+i%26)) + strings.Repeat("z", i/26)
		out[i] = runtime.Observation{Item: item, Version: "v1",
			Envelope: runtime.Envelope{DeliveryID: item + "@v1", Family: "test.item", Payload: body}}
	}
	return out
}

// A page over a bound fails the scan as partial: nothing accepted, no
// checkpoint; the scan after it, within bounds, completes.
func TestReconcilePageBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		page runtime.ReconcilePage
		hang bool
		want string
	}{
		{"more observations than the page limit", runtime.ReconcilePage{Observations: observations(3, 1), Complete: true}, false, "over the page limit of 2"},
		{"more bytes than a page holds", runtime.ReconcilePage{Observations: observations(2, runtime.MaxReconcilePageBytes/2), Complete: true}, false, "bytes"},
		{"no answer within the page timeout", runtime.ReconcilePage{}, true, "page timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.hang {
				old := runtime.ReconcilePageTimeout
				runtime.ReconcilePageTimeout = time.Millisecond // the bound under test, not a wait
				t.Cleanup(func() { runtime.ReconcilePageTimeout = old })
			}
			src := &pageSource{page: tc.page, hang: tc.hang}
			src.page.Checkpoint = "c1"
			h := newHarness(t, runtime.Config{Sources: map[string]runtime.Source{"up": {ScopeID: "s1", Ingress: src, PageLimit: 2}}})
			rep, err := h.engine.Reconcile(ctx, "up")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.False(t, rep.Complete)
			assert.Empty(t, rep.Accepted)
			cp, err := h.engine.Checkpoint(ctx, "up")
			require.NoError(t, err)
			assert.Empty(t, cp.Checkpoint, "a partial scan moves no checkpoint")
			snap, err := h.engine.Snapshot(ctx, "up")
			require.NoError(t, err)
			assert.Empty(t, snap)

			src.hang, src.page = false, runtime.ReconcilePage{Observations: observations(2, 1), Complete: true, Checkpoint: "c1"}
			rep, err = h.engine.Reconcile(ctx, "up")
			require.NoError(t, err, "the retried scan within bounds completes")
			assert.Len(t, rep.Accepted, 2)
		})
	}
}

// An unchanged observation sent in other bytes (the same JSON written
// another way) is still unchanged, not a conflict and not a new Event.
func TestReconcileUnchangedInOtherBytes(t *testing.T) {
	ctx := context.Background()
	obs := runtime.Observation{Item: "a", Version: "v1", Envelope: runtime.Envelope{DeliveryID: "a@v1", Family: "test.item",
		Payload: json.RawMessage(`{"x":1,"y":2}`)}}
	src := &pageSource{page: runtime.ReconcilePage{Observations: []runtime.Observation{obs}, Complete: true}}
	h := newHarness(t, runtime.Config{Sources: map[string]runtime.Source{"up": {ScopeID: "s1", Ingress: src}}})
	rep, err := h.engine.Reconcile(ctx, "up")
	require.NoError(t, err)
	require.Len(t, rep.Accepted, 1)
	for _, payload := range []string{`{"x":1,"y":2}`, `{ "y": 2, "x": 1 }`, `{"y":2,"x":1}`} {
		src.page.Observations[0].Envelope.Payload = json.RawMessage(payload)
		rep, err = h.engine.Reconcile(ctx, "up")
		require.NoError(t, err, payload)
		assert.Empty(t, rep.Accepted, payload)
		assert.Equal(t, 1, rep.Unchanged, payload)
	}
	src.page.Observations[0].Envelope.Payload = json.RawMessage(`{"x":1,"y":3}`)
	_, err = h.engine.Reconcile(ctx, "up")
	assert.ErrorIs(t, err, runtime.ErrConflict, "the same (item, version) with other content")
}
