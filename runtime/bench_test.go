package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

// BenchmarkIngressToWork measures end-to-end events per second from a push
// through routing to Work creation on the SQLite store, beside a baseline
// of bare acceptance (one write transaction per Event) measured in the
// same run: the ratio is what routing and Work creation cost on top.
// push_route_create is sequential, one push at a time: a push that finds
// nothing waiting is routed in its accepting transaction, and the pass
// after it (still measured) finds nothing left.
func BenchmarkIngressToWork(b *testing.B) {
	ctx := context.Background()
	b.Run("baseline_accept", func(b *testing.B) {
		h := newHarness(b, runtime.Config{})
		b.ResetTimer()
		for i := range b.N {
			if _, err := h.engine.Accept(ctx, testEnvelope("src", fmt.Sprint(i), "s1", payload{Match: true, Key: fmt.Sprint("k", i)})); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("push_route_create", func(b *testing.B) {
		h := newHarness(b, runtime.Config{
			Sources:  map[string]runtime.Source{"up": {ScopeID: "s1", Ingress: &fakeSource{}}},
			Handlers: map[string]runtime.RouteHandler{"keyed": &keyedHandler{}},
			Routes:   map[string][]runtime.Route{"s1": {{Handler: "keyed", Kind: "task", Binding: "b"}}},
		})
		b.ResetTimer()
		for i := range b.N {
			body, _ := json.Marshal([]string{fmt.Sprint("k", i)})
			if _, err := h.engine.Push(ctx, "up", runtime.Delivery{ID: fmt.Sprint(i), Body: body}); err != nil {
				b.Fatal(err)
			}
			if n, err := h.engine.RoutePending(ctx); err != nil || n > 1 {
				b.Fatal(n, err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		require.Len(b, h.works(b), min(b.N, runtime.DefaultPageLimit))
		cursor, err := h.engine.RoutingCursor(ctx)
		require.NoError(b, err)
		require.Equal(b, int64(b.N), cursor, "every Event routed")
	})
	// A burst: the Events are accepted one by one, unrouted (as the
	// webhook's group acceptance takes them), then routed in batches.
	b.Run("accept_burst_then_route", func(b *testing.B) {
		h := newHarness(b, runtime.Config{
			Handlers: map[string]runtime.RouteHandler{"keyed": &keyedHandler{}},
			Routes:   map[string][]runtime.Route{"s1": {{Handler: "keyed", Kind: "task", Binding: "b"}}},
		})
		b.ResetTimer()
		for i := range b.N {
			if _, err := h.engine.Accept(ctx, testEnvelope("src", fmt.Sprint(i), "s1", payload{Match: true, Key: fmt.Sprint("k", i)})); err != nil {
				b.Fatal(err)
			}
		}
		for routed := 0; routed < b.N; {
			n, err := h.engine.RoutePending(ctx)
			if err != nil || n == 0 {
				b.Fatal(n, err)
			}
			routed += n
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// parkedExecutor's runs never end while observed, so only the start is
// measured.
type parkedExecutor struct{}

func (parkedExecutor) Run(ctx context.Context, req runtime.RunRequest) (runtime.RunHandle, error) {
	if err := req.PersistRecovery(ctx, json.RawMessage(`{"run":"`+req.ExecutionID+`"}`)); err != nil {
		return nil, err
	}
	return parkedHandle{}, nil
}

func (parkedExecutor) Recover(context.Context, runtime.RecoverRequest) (runtime.RunHandle, error) {
	return parkedHandle{}, nil
}

type parkedHandle struct{}

func (parkedHandle) Wait(ctx context.Context) (runtime.RunResult, error) {
	<-ctx.Done()
	return runtime.RunResult{}, ctx.Err()
}

// newStartingHarness is the engine the start benchmarks run: one binding
// on an executor whose runs park, and no pool limit.
func newStartingHarness(b *testing.B) *harness {
	return newHarness(b, runtime.Config{
		Bindings:  map[string]runtime.Binding{"b": {Executor: "parked"}},
		Executors: map[string]runtime.Executor{"parked": parkedExecutor{}},
		Pools:     map[string]int{runtime.PoolJob: 1 << 30},
	})
}

// pendingWork is a Work of the binding newStartingHarness runs, pending.
func pendingWork(id string) runtime.Work {
	return runtime.Work{ID: id, ScopeID: "s1", Kind: "task", Binding: "b", State: runtime.WorkPending}
}

// putWork writes w in a transaction of its own (one bare synced write) and
// returns it as stored.
func putWork(b *testing.B, h *harness, w runtime.Work) runtime.Work {
	err := h.store.Transact(context.Background(), func(tx runtime.Tx) error {
		var err error
		w, err = tx.PutWork(w)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// BenchmarkSchedulerStart measures the scheduler's overhead per Execution
// start (the start transaction with lease and Execution, Run with one
// fenced persist, the transaction marking it running), beside a baseline
// of one bare write transaction (a Work update) in the same run.
func BenchmarkSchedulerStart(b *testing.B) {
	ctx := context.Background()
	b.Run("baseline_write", func(b *testing.B) {
		h := newStartingHarness(b)
		w := putWork(b, h, pendingWork("w"))
		b.ResetTimer()
		for range b.N {
			err := h.store.Transact(ctx, func(tx runtime.Tx) error {
				var err error
				w, err = tx.PutWork(w)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/op-write")
	})
	b.Run("start", func(b *testing.B) {
		h := newStartingHarness(b)
		var total time.Duration
		for i := range b.N {
			b.StopTimer()
			putWork(b, h, pendingWork(fmt.Sprint("w", i)))
			b.StartTimer()
			start := time.Now()
			xs, err := h.engine.StartPending(ctx)
			total += time.Since(start)
			if err != nil || len(xs) != 1 {
				b.Fatal(len(xs), err)
			}
		}
		b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/start")
	})
}

// BenchmarkEngineRatios measures issue 18's two engine targets with each
// side of a ratio interleaved in one loop, so both sides see the same
// machine (a shared machine's load moves between two sub-benchmarks run
// one after the other). Each iteration does, on stores of their own: a
// bare acceptance (as baseline_accept) and a push routed to Work (as
// push_route_create, the pass after it included); a bare Work write (as
// baseline_write) and an Execution start (as start). It reports the mean
// of each and the ratios the targets name: ingress_x is accept time over
// push → route → Work time (events/s of the push over the bare accept's,
// target ≥ 0.7) and start_x is start time over write time (target ≤ 1.5).
func BenchmarkEngineRatios(b *testing.B) {
	ctx := context.Background()
	accepting := newHarness(b, runtime.Config{})
	pushing := newHarness(b, runtime.Config{
		Sources:  map[string]runtime.Source{"up": {ScopeID: "s1", Ingress: &fakeSource{}}},
		Handlers: map[string]runtime.RouteHandler{"keyed": &keyedHandler{}},
		Routes:   map[string][]runtime.Route{"s1": {{Handler: "keyed", Kind: "task", Binding: "b"}}},
	})
	starting := newStartingHarness(b)
	writing := newHarness(b, runtime.Config{})
	written := putWork(b, writing, pendingWork("w"))
	var accept, push, write, start time.Duration
	timed := func(total *time.Duration, f func() error) {
		t := time.Now()
		err := f()
		*total += time.Since(t)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		key := fmt.Sprint("k", i)
		timed(&accept, func() error {
			_, err := accepting.engine.Accept(ctx, testEnvelope("src", fmt.Sprint(i), "s1", payload{Match: true, Key: key}))
			return err
		})
		body, _ := json.Marshal([]string{key})
		timed(&push, func() error {
			if _, err := pushing.engine.Push(ctx, "up", runtime.Delivery{ID: fmt.Sprint(i), Body: body}); err != nil {
				return err
			}
			_, err := pushing.engine.RoutePending(ctx)
			return err
		})
		timed(&write, func() error {
			written = putWork(b, writing, written)
			return nil
		})
		putWork(b, starting, pendingWork(fmt.Sprint("w", i)))
		timed(&start, func() error {
			xs, err := starting.engine.StartPending(ctx)
			if err == nil && len(xs) != 1 {
				err = fmt.Errorf("started %d", len(xs))
			}
			return err
		})
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(accept.Microseconds())/n, "µs/accept")
	b.ReportMetric(float64(push.Microseconds())/n, "µs/push_route")
	b.ReportMetric(float64(write.Microseconds())/n, "µs/write")
	b.ReportMetric(float64(start.Microseconds())/n, "µs/start")
	b.ReportMetric(accept.Seconds()/push.Seconds(), "ingress_x")
	b.ReportMetric(start.Seconds()/write.Seconds(), "start_x")
	cursor, err := pushing.engine.RoutingCursor(ctx)
	require.NoError(b, err)
	require.Equal(b, int64(b.N), cursor, "every pushed Event routed")
}
