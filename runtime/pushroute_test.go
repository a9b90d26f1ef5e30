package runtime_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/runtimetest"
)

// payloadSource turns a delivery whose body is a JSON array of payloads
// into one envelope each, naming works when set.
type payloadSource struct{ works []string }

func (s payloadSource) Push(_ context.Context, d runtime.Delivery) ([]runtime.Envelope, error) {
	var ps []payload
	if err := json.Unmarshal(d.Body, &ps); err != nil {
		return nil, err
	}
	var out []runtime.Envelope
	for i, p := range ps {
		b, _ := json.Marshal(p)
		out = append(out, runtime.Envelope{DeliveryID: d.ID + "/" + string(rune('a'+i)), Family: "test.item", Payload: b, Works: s.works})
	}
	return out, nil
}

func (payloadSource) Reconcile(context.Context, runtime.ReconcileRequest) (runtime.ReconcilePage, error) {
	return runtime.ReconcilePage{Complete: true}, nil
}

// seenHandler is keyedHandler recording the Events it was shown.
type seenHandler struct {
	keyedHandler
	mu   sync.Mutex
	seen []runtime.Event
	// block, when set, holds each Match until its context ends.
	block bool
}

func (h *seenHandler) Match(ctx context.Context, in runtime.RouteInput) (runtime.RouteDecision, error) {
	h.mu.Lock()
	h.seen = append(h.seen, in.Event)
	h.mu.Unlock()
	if h.block {
		<-ctx.Done()
		return runtime.RouteDecision{}, ctx.Err()
	}
	return h.keyedHandler.Match(ctx, in)
}

func (h *seenHandler) shown() []runtime.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]runtime.Event(nil), h.seen...)
}

type pushHarness struct {
	*harness
	store   *countingStore
	handler *seenHandler
}

func newPushHarness(t *testing.T, src payloadSource) *pushHarness {
	clock := runtimetest.NewFakeClock(t0)
	store := &countingStore{Store: openStore(t, clock)}
	handler := &seenHandler{}
	h := attach(t, runtime.Config{
		Store:    store,
		Sources:  map[string]runtime.Source{"up": {ScopeID: "s1", Ingress: src}},
		Handlers: map[string]runtime.RouteHandler{"keyed": handler},
		Routes:   map[string][]runtime.Route{"s1": {{Handler: "keyed", Kind: "task", Binding: "b"}}},
	}, clock)
	return &pushHarness{harness: h, store: store, handler: handler}
}

func (h *pushHarness) push(t *testing.T, id string, ps ...payload) []runtime.Event {
	t.Helper()
	body, err := json.Marshal(ps)
	require.NoError(t, err)
	evs, err := h.engine.Push(context.Background(), "up", runtime.Delivery{ID: id, Body: body})
	require.NoError(t, err)
	return evs
}

func (h *pushHarness) cursor(t *testing.T) int64 {
	t.Helper()
	c, err := h.engine.RoutingCursor(context.Background())
	require.NoError(t, err)
	return c
}

func (h *pushHarness) stored(t *testing.T, id string) runtime.Event {
	t.Helper()
	var ev runtime.Event
	h.view(t, func(r runtime.ReadTx) error {
		var err error
		ev, err = r.Event(id)
		return err
	})
	return ev
}

// A push that finds nothing waiting for routing is accepted and routed in
// one synced commit, its handler shown exactly the Events as stored; the
// pass after it has nothing left.
func TestPushRoutesInItsAcceptingTransaction(t *testing.T) {
	h := newPushHarness(t, payloadSource{})
	before := h.store.commits.Load()
	evs := h.push(t, "d1", payload{Match: true, Key: "k1"}, payload{Match: true, Key: "k2"})
	require.Len(t, evs, 2)
	assert.Equal(t, int64(1), h.store.commits.Load()-before, "synced writes for push → route → Work")
	assert.Zero(t, h.store.deferred.Load())
	assert.Equal(t, evs[1].Sequence, h.cursor(t), "both Events routed")

	shown := h.handler.shown()
	require.Len(t, shown, 2)
	for i, ev := range evs {
		stored := h.stored(t, ev.ID)
		assert.Equal(t, stored, ev, "Push returns the Event as stored")
		assert.Equal(t, stored.Sequence, shown[i].Sequence)
		assert.True(t, stored.AcceptedAt.Equal(shown[i].AcceptedAt), "the handler saw the acceptance time kept")
		assert.Equal(t, stored.ID, shown[i].ID)
		rec := record(t, h.harness, ev.ID)
		assert.Equal(t, runtime.DispositionCreated, rec.Disposition)
		assert.Equal(t, runtime.WorkPending, h.work(t, rec.WorkID).State)
	}

	n, err := h.engine.RoutePending(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n, "nothing left for the pass")
	assert.Len(t, h.handler.shown(), 2, "no handler call again")

	// A second delivery of the same content is the stored Event, routed
	// once: nothing is decided again in the store.
	again := h.push(t, "d1", payload{Match: true, Key: "k1"}, payload{Match: true, Key: "k2"})
	assert.Equal(t, evs, again)
	assert.Len(t, h.works(t), 2)
	assert.Equal(t, evs[1].Sequence, h.cursor(t))
}

// A push behind Events waiting for routing is only accepted: routing
// keeps sequence order, and the pass routes all of them.
func TestPushBehindUnroutedEventsWaitsForThePass(t *testing.T) {
	h := newPushHarness(t, payloadSource{})
	first := accept(t, h.harness, testEnvelope("up", "early", "s1", payload{Match: true, Key: "k0"}))
	evs := h.push(t, "d1", payload{Match: true, Key: "k1"})
	assert.Zero(t, h.cursor(t), "nothing routed ahead of the earlier Event")
	assert.Empty(t, h.handler.shown(), "no handler call for a push that cannot be routed with it")

	n, err := h.engine.RoutePending(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	shown := h.handler.shown()
	require.Len(t, shown, 2)
	assert.Equal(t, first[0].ID, shown[0].ID, "in sequence order")
	assert.Equal(t, evs[0].ID, shown[1].ID)
}

// What routing decided on must still hold when it applies; when it does
// not, or the handler fails or overruns PushRouteTimeout, the push is
// accepted all the same and its Events wait for the pass, which routes
// them (or reports the handler's failure) as before.
func TestPushAcceptedUnroutedWhenItsRoutingCannotApply(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		works []string
		setup func(t *testing.T, h *pushHarness)
		ps    []payload
		// passErr: the pass fails too (the handler's answer is at fault)
		passErr bool
	}{
		{name: "handler fails", ps: []payload{{Fail: true}}, passErr: true},
		{name: "decision refused by the store", ps: []payload{{Match: true, Key: "bad\x01key"}}, passErr: true},
		{name: "second Event's decision refused", ps: []payload{{Match: true, Key: "k1"}, {Match: true, Key: "bad\x01key"}}, passErr: true},
		{name: "snapshot's Work changed", works: []string{"w1"}, ps: []payload{{Match: true, Key: "k1"}},
			setup: func(t *testing.T, h *pushHarness) {
				require.NoError(t, h.store.Transact(ctx, func(tx runtime.Tx) error {
					_, err := tx.PutWork(runtime.Work{ID: "w1", ScopeID: "s1", Kind: "task", Binding: "b", State: runtime.WorkPending})
					return err
				}))
				h.handler.before = func(in runtime.RouteInput) {
					if in.Work == nil {
						return
					}
					require.NoError(t, h.store.Transact(ctx, func(tx runtime.Tx) error {
						w, err := tx.Work("w1")
						if err != nil {
							return err
						}
						_, err = tx.PutWork(w) // a new revision under the decision
						return err
					}))
					h.handler.before = nil
				}
			}},
		{name: "handler overruns its bound", ps: []payload{{Match: true, Key: "k1"}},
			setup: func(t *testing.T, h *pushHarness) {
				h.handler.block = true
				old := runtime.PushRouteTimeout
				runtime.PushRouteTimeout = time.Millisecond // the handler never answers: any bound ends it
				t.Cleanup(func() { runtime.PushRouteTimeout = old })
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newPushHarness(t, payloadSource{works: c.works})
			if c.setup != nil {
				c.setup(t, h)
			}
			evs := h.push(t, "d1", c.ps...)
			require.Len(t, evs, len(c.ps), "accepted whatever its routing did")
			for _, ev := range evs {
				assert.Equal(t, ev, h.stored(t, ev.ID), "durable")
			}
			assert.Zero(t, h.cursor(t), "not routed in the accepting transaction")
			for _, ev := range evs {
				_, err := h.engine.RouteRecordOf(ctx, ev.ID)
				assert.ErrorIs(t, err, runtime.ErrNotFound, "no route record")
			}

			h.handler.block = false
			n, err := h.engine.RoutePending(ctx)
			if c.passErr {
				assert.Error(t, err, "the pass meets the same failure and reports it")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, len(evs), n)
			for _, ev := range evs {
				assert.Equal(t, runtime.DispositionCreated, record(t, h.harness, ev.ID).Disposition)
			}
		})
	}
}

// skewedStore's transactions accept Events a second after the time they
// are given: the Events a handler was shown are not the ones accepted.
type skewedStore struct{ *countingStore }

type skewedTx struct{ runtime.Tx }

func (s skewedStore) Transact(ctx context.Context, fn func(runtime.Tx) error) error {
	return s.countingStore.Transact(ctx, func(tx runtime.Tx) error { return fn(skewedTx{tx}) })
}

func (t skewedTx) AcceptEventAt(env runtime.Envelope, at time.Time) (runtime.Event, bool, error) {
	return t.Tx.(runtime.PreAcceptTx).AcceptEventAt(env, at.Add(time.Second))
}

// Routing applies only to the very Events it was decided on.
func TestPushRoutingDecidedOnOtherEventsIsNotApplied(t *testing.T) {
	h := newPushHarness(t, payloadSource{})
	e, err := runtime.New(runtime.Config{
		Store:    skewedStore{h.store},
		Clock:    h.clock,
		Sources:  map[string]runtime.Source{"up": {ScopeID: "s1", Ingress: payloadSource{}}},
		Handlers: map[string]runtime.RouteHandler{"keyed": h.handler},
		Routes:   map[string][]runtime.Route{"s1": {{Handler: "keyed", Kind: "task", Binding: "b"}}},
	})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	body, _ := json.Marshal([]payload{{Match: true, Key: "k1"}})
	evs, err := e.Push(context.Background(), "up", runtime.Delivery{ID: "d1", Body: body})
	require.NoError(t, err)
	require.Len(t, evs, 1)
	shown := h.handler.shown()
	require.Len(t, shown, 1)
	require.False(t, shown[0].AcceptedAt.Equal(evs[0].AcceptedAt), "the store accepted another Event than the one decided on")
	assert.Zero(t, h.cursor(t), "its routing is not applied")
}

// After a routed push the engine predicts the next push's Events from
// where it left the log; when another writer accepted an Event since,
// the prediction is wrong, the accepting transaction sees it and applies
// nothing, and the pass routes both in sequence order.
func TestPushAfterAnotherWriterIsNotRoutedOnAStalePrediction(t *testing.T) {
	h := newPushHarness(t, payloadSource{})
	first := h.push(t, "d1", payload{Match: true, Key: "k1"})
	require.Equal(t, first[0].Sequence, h.cursor(t))
	other := accept(t, h.harness, testEnvelope("up", "elsewhere", "s1", payload{Match: true, Key: "k2"}))
	evs := h.push(t, "d2", payload{Match: true, Key: "k3"})
	assert.Equal(t, first[0].Sequence, h.cursor(t), "nothing routed past the other writer's Event")
	for _, ev := range []runtime.Event{other[0], evs[0]} {
		_, err := h.engine.RouteRecordOf(context.Background(), ev.ID)
		assert.ErrorIs(t, err, runtime.ErrNotFound)
	}

	n, err := h.engine.RoutePending(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, evs[0].Sequence, h.cursor(t))
	assert.Equal(t, runtime.DispositionCreated, record(t, h.harness, evs[0].ID).Disposition)

	// Routed by the pass, the log's end is read again: the next push is
	// routed with its acceptance.
	next := h.push(t, "d3", payload{Match: true, Key: "k4"})
	assert.Equal(t, next[0].Sequence, h.cursor(t))
}
