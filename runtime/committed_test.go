package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/runtimetest"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// viewCountingStore is the SQLite store, every capability of it kept,
// counting the read transactions it is asked for.
type viewCountingStore struct {
	*sqlite.Store
	views atomic.Int64
}

func (s *viewCountingStore) View(ctx context.Context, fn func(runtime.ReadTx) error) error {
	s.views.Add(1)
	return s.Store.View(ctx, fn)
}

// withoutCommittedSequence hides the store's CommittedSequenceStore
// capability (keeping the pre-accept one, so pushes still route in their
// commit): the engine must then read where the log ends.
type withoutCommittedSequence struct{ *viewCountingStore }

func (s withoutCommittedSequence) CommittedSequence() {} // not the capability's signature

func newSequenceHarness(t *testing.T, hide bool) (*harness, *viewCountingStore) {
	return newSequenceHarnessWith(t, hide, &keyedHandler{})
}

func newSequenceHarnessWith(t *testing.T, hide bool, handler runtime.RouteHandler) (*harness, *viewCountingStore) {
	clock := runtimetest.NewFakeClock(t0)
	st, err := sqlite.Open(t.TempDir(), sqlite.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	vs := &viewCountingStore{Store: st}
	var store runtime.Store = vs
	if hide {
		store = withoutCommittedSequence{vs}
	}
	h := attach(t, runtime.Config{
		Store:    store,
		Sources:  map[string]runtime.Source{"up": {ScopeID: "s1", Ingress: &fakeSource{}}},
		Handlers: map[string]runtime.RouteHandler{"keyed": handler},
		Routes:   map[string][]runtime.Route{"s1": {{Handler: "keyed", Kind: "task", Binding: "b"}}},
	}, clock)
	return h, vs
}

func pushKeys(t *testing.T, h *harness, id string, keys ...string) []runtime.Event {
	t.Helper()
	body, err := json.Marshal(keys)
	require.NoError(t, err)
	evs, err := h.engine.Push(context.Background(), "up", runtime.Delivery{ID: id, Body: body})
	require.NoError(t, err)
	return evs
}

// routeCounting runs one routing pass and returns how many Events it
// routed and how many read transactions it took.
func routeCounting(t *testing.T, h *harness, vs *viewCountingStore) (routed int, views int64) {
	t.Helper()
	before := vs.views.Load()
	n, err := h.engine.RoutePending(context.Background())
	require.NoError(t, err)
	return n, vs.views.Load() - before
}

// After a push routed in its commit, the routing pass knows from the
// store's committed sequence that nothing is left, without a read; a
// store that cannot say so is read, as before.
func TestRoutingPassAfterARoutedPushReadsNothing(t *testing.T) {
	for _, hide := range []bool{false, true} {
		t.Run(fmt.Sprintf("capability_hidden=%v", hide), func(t *testing.T) {
			h, vs := newSequenceHarness(t, hide)
			evs := pushKeys(t, h, "d1", "k1", "k2")
			require.Len(t, evs, 2)
			n, views := routeCounting(t, h, vs)
			assert.Zero(t, n, "the push was routed in its commit")
			if hide {
				assert.Equal(t, int64(1), views, "without the capability the pass reads the log")
			} else {
				assert.Zero(t, views, "the pass knows nothing is left")
			}
			cursor, err := h.engine.RoutingCursor(context.Background())
			require.NoError(t, err)
			assert.Equal(t, evs[1].Sequence, cursor)
		})
	}
}

// Whatever accepted an Event after the last routing (Accept, a bare
// store transaction), the next pass reads and routes it; once it has,
// the pass after it reads nothing again.
func TestRoutingPassSeesEveryLaterAcceptance(t *testing.T) {
	ctx := context.Background()
	h, vs := newSequenceHarness(t, false)
	pushKeys(t, h, "d1", "k1")
	_, err := h.engine.Accept(ctx, testEnvelope("up", "accepted", "s1", payload{Match: true, Key: "k2"}))
	require.NoError(t, err)
	n, views := routeCounting(t, h, vs)
	assert.Equal(t, 1, n, "the accepted Event is routed")
	assert.Equal(t, int64(1), views)

	err = vs.Transact(ctx, func(tx runtime.Tx) error {
		_, _, err := tx.AcceptEvent(testEnvelope("up", "bare", "s1", payload{Match: true, Key: "k3"}))
		return err
	})
	require.NoError(t, err)
	n, _ = routeCounting(t, h, vs)
	assert.Equal(t, 1, n, "an Event a bare store transaction accepted is routed")

	n, views = routeCounting(t, h, vs)
	assert.Zero(t, n)
	assert.Zero(t, views, "every Event is routed and the pass knows it")

	// A transaction that accepted and rolled back leaves nothing to route
	// and is not counted.
	err = vs.Transact(ctx, func(tx runtime.Tx) error {
		if _, _, err := tx.AcceptEvent(testEnvelope("up", "rolled-back", "s1", payload{Match: true, Key: "k4"})); err != nil {
			return err
		}
		return fmt.Errorf("roll back")
	})
	require.Error(t, err)
	n, views = routeCounting(t, h, vs)
	assert.Zero(t, n)
	assert.Zero(t, views, "a rolled-back acceptance is not counted")
}

// A pass that routes a full page (more Events waiting than a page holds)
// leaves the rest to the next pass, which reads them.
func TestRoutingPassAfterAFullPageReadsTheRest(t *testing.T) {
	ctx := context.Background()
	h, vs := newSequenceHarness(t, false)
	envs := make([]runtime.Envelope, runtime.DefaultPageLimit+1)
	for i := range envs {
		envs[i] = testEnvelope("up", fmt.Sprint("e", i), "s1", payload{Match: true, Key: fmt.Sprint("k", i)})
	}
	_, err := h.engine.Accept(ctx, envs...)
	require.NoError(t, err)
	n, _ := routeCounting(t, h, vs)
	assert.Equal(t, runtime.DefaultPageLimit, n)
	n, views := routeCounting(t, h, vs)
	assert.Equal(t, 1, n, "the Event past the first page")
	assert.Equal(t, int64(1), views)
	n, views = routeCounting(t, h, vs)
	assert.Zero(t, n)
	assert.Zero(t, views)
}

// After a routed push, another writer's acceptance is seen from the
// store's committed sequence before the next push decides anything: that
// push waits for the pass behind the other Event, and the pass routes
// both in sequence order.
func TestPushAfterAnotherWriterSeesItFromTheCommittedSequence(t *testing.T) {
	ctx := context.Background()
	h, vs := newSequenceHarness(t, false)
	first := pushKeys(t, h, "d1", "k1")
	other, err := h.engine.Accept(ctx, testEnvelope("up", "elsewhere", "s1", payload{Match: true, Key: "k2"}))
	require.NoError(t, err)
	next := pushKeys(t, h, "d2", "k3")
	cursor, err := h.engine.RoutingCursor(ctx)
	require.NoError(t, err)
	assert.Equal(t, first[0].Sequence, cursor, "nothing routed past the other writer's Event")
	n, _ := routeCounting(t, h, vs)
	assert.Equal(t, 2, n)
	for _, ev := range []runtime.Event{other[0], next[0]} {
		assert.Equal(t, runtime.DispositionCreated, record(t, h, ev.ID).Disposition)
	}
	last := pushKeys(t, h, "d3", "k4")
	n, views := routeCounting(t, h, vs)
	assert.Zero(t, n, "routed in its commit again")
	assert.Zero(t, views)
	assert.Equal(t, runtime.DispositionCreated, record(t, h, last[0].ID).Disposition)
}

// Another writer that accepts an Event while a push's routing is being
// decided is seen by the accepting transaction from the committed
// sequence (no read of the log): the push is accepted unrouted, at a time
// of its own, and the pass routes both in sequence order.
func TestPushRacingAnotherWriterIsAcceptedUnrouted(t *testing.T) {
	ctx := context.Background()
	var (
		h     *harness
		vs    *viewCountingStore
		raced atomic.Bool
		other runtime.Event
	)
	handler := &keyedHandler{before: func(in runtime.RouteInput) {
		if in.Event.DeliveryID != "d2/0" || !raced.CompareAndSwap(false, true) {
			return
		}
		h.clock.Advance(time.Second) // the push was decided with the time before
		err := vs.Transact(ctx, func(tx runtime.Tx) error {
			var err error
			other, _, err = tx.AcceptEvent(testEnvelope("up", "racing", "s1", payload{Match: true, Key: "k2"}))
			return err
		})
		require.NoError(t, err)
	}}
	h, vs = newSequenceHarnessWith(t, false, handler)
	first := pushKeys(t, h, "d1", "k1")
	next := pushKeys(t, h, "d2", "k3")
	require.True(t, raced.Load())
	require.Equal(t, other.Sequence+1, next[0].Sequence)
	assert.False(t, next[0].AcceptedAt.Before(other.AcceptedAt), "the later Event was not stamped with the time decided before the other")
	cursor, err := h.engine.RoutingCursor(ctx)
	require.NoError(t, err)
	assert.Equal(t, first[0].Sequence, cursor, "nothing routed past the racing Event")
	n, _ := routeCounting(t, h, vs)
	assert.Equal(t, 2, n)
	for _, ev := range []runtime.Event{other, next[0]} {
		assert.Equal(t, runtime.DispositionCreated, record(t, h, ev.ID).Disposition)
	}
}
