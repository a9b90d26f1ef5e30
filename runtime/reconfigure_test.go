package runtime_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

// A new configuration applies to the next Event without a new engine, and
// an execution started under the old one is still observed to its end.
func TestReconfigureRoutesNextEventAndKeepsRunningExecutions(t *testing.T) {
	ctx := context.Background()
	exec := newFakeExecutor()
	kh := &keyedHandler{}
	cfg := runtime.Config{
		Handlers:  map[string]runtime.RouteHandler{"keyed": kh},
		Routes:    map[string][]runtime.Route{"s1": {{Handler: "keyed", Kind: "task", Binding: "b"}}},
		Bindings:  map[string]runtime.Binding{"b": {Executor: "x"}},
		Executors: map[string]runtime.Executor{"x": exec},
	}
	h := newHarness(t, cfg)
	accept(t, h, testEnvelope("src", "1", "s1", payload{Match: true, Key: "k1"}))
	routeAll(t, h)
	started, err := h.engine.StartPending(ctx)
	require.NoError(t, err)
	require.Len(t, started, 1)

	// The new generation moves the route to scope s2 and drops the binding.
	require.NoError(t, h.engine.Reconfigure(runtime.Config{
		Handlers:  map[string]runtime.RouteHandler{"keyed": kh},
		Routes:    map[string][]runtime.Route{"s2": {{Handler: "keyed", Kind: "task", Binding: "b2"}}},
		Bindings:  map[string]runtime.Binding{"b2": {Executor: "x"}},
		Executors: map[string]runtime.Executor{"x": exec},
	}))
	evs := accept(t, h,
		testEnvelope("src", "2", "s1", payload{Match: true, Key: "k2"}),
		testEnvelope("src", "3", "s2", payload{Match: true, Key: "k3"}))
	routeAll(t, h)
	assert.Equal(t, runtime.DispositionUnmatched, record(t, h, evs[0].ID).Disposition, "s1 has no routes now")
	assert.Equal(t, runtime.DispositionCreated, record(t, h, evs[1].ID).Disposition, "s2's new route took the Event")

	exec.Succeed(started[0].ID)
	h.engine.Drain()
	assert.Equal(t, runtime.WorkDone, h.work(t, started[0].WorkID).State, "the run begun under the old tables settled")
}

// A refused configuration changes nothing: the old routes keep routing.
func TestReconfigureRefusalKeepsTables(t *testing.T) {
	kh := &keyedHandler{}
	h := routingHarness(t, kh)
	err := h.engine.Reconfigure(runtime.Config{
		Handlers: map[string]runtime.RouteHandler{"keyed": kh},
		Routes:   map[string][]runtime.Route{"s1": {{Handler: "missing", Kind: "task"}}},
	})
	require.ErrorIs(t, err, runtime.ErrInvalid)
	err = h.engine.Reconfigure(runtime.Config{
		Bindings: map[string]runtime.Binding{"b": {Executor: "missing"}},
	})
	require.ErrorIs(t, err, runtime.ErrInvalid)
	evs := accept(t, h, testEnvelope("src", "1", "s1", payload{Match: true, Key: "k"}))
	routeAll(t, h)
	assert.Equal(t, runtime.DispositionCreated, record(t, h, evs[0].ID).Disposition)
}

// Reconfigure races routing, starts and traces: run with -race. Every
// pass works on one whole table, so none panics on a route or binding that
// the other table lacks.
func TestReconfigureConcurrentWithRouting(t *testing.T) {
	ctx := context.Background()
	exec := newFakeExecutor()
	kh := &keyedHandler{}
	one := runtime.Config{
		Handlers:  map[string]runtime.RouteHandler{"keyed": kh},
		Routes:    map[string][]runtime.Route{"s1": {{Handler: "keyed", Kind: "task", Binding: "b"}}},
		Bindings:  map[string]runtime.Binding{"b": {Executor: "x"}},
		Executors: map[string]runtime.Executor{"x": exec},
	}
	two := runtime.Config{
		Handlers: map[string]runtime.RouteHandler{"other": kh},
		Routes:   map[string][]runtime.Route{"s1": {{Handler: "other", Kind: "task", Binding: "c"}, {Handler: "other", Kind: "more"}}},
	}
	h := newHarness(t, one)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			next := one
			if i%2 == 0 {
				next = two
			}
			require.NoError(t, h.engine.Reconfigure(next))
		}
	})
	for i := range 40 {
		accept(t, h, testEnvelope("src", string(rune('a'+i%26))+string(rune('0'+i/26)), "s1", payload{Match: true}))
		_, err := h.engine.RoutePending(ctx)
		require.NoError(t, err)
		_, err = h.engine.StartPending(ctx)
		require.NoError(t, err)
		_, err = h.engine.RouteTrace(ctx, "s1", runtime.Event{Envelope: testEnvelope("src", "t", "", payload{Match: true})})
		require.NoError(t, err)
	}
	close(stop)
	wg.Wait()
	for _, req := range drained(exec.started) {
		exec.Succeed(req.ExecutionID)
	}
	h.engine.Drain()
}

// blockingHandler matches every Event once released.
type blockingHandler struct {
	entered chan struct{}
	release chan struct{}
}

func (h *blockingHandler) Match(_ context.Context, in runtime.RouteInput) (runtime.RouteDecision, error) {
	select {
	case h.entered <- struct{}{}:
	default:
	}
	<-h.release
	return runtime.RouteDecision{Match: true, Reason: "released"}, nil
}

// A pass under way when Run's context ends is finished, not cut short: the
// Event being routed at shutdown is routed, and Run returns after it.
func TestRunFinishesThePassUnderWayWhenCancelled(t *testing.T) {
	bh := &blockingHandler{entered: make(chan struct{}, 1), release: make(chan struct{})}
	h := newHarness(t, runtime.Config{
		Handlers: map[string]runtime.RouteHandler{"block": bh},
		Routes:   map[string][]runtime.Route{"s1": {{Handler: "block", Kind: "task"}}},
	})
	evs := accept(t, h, testEnvelope("src", "1", "s1", payload{}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.engine.Run(ctx) }()
	<-bh.entered
	cancel()
	close(bh.release)
	require.ErrorIs(t, <-done, context.Canceled)
	assert.Equal(t, runtime.DispositionCreated, record(t, h, evs[0].ID).Disposition)
}
