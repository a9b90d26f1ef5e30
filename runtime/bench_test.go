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
			if n, err := h.engine.RoutePending(ctx); err != nil || n != 1 {
				b.Fatal(n, err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		require.Len(b, h.works(b), min(b.N, runtime.DefaultPageLimit))
	})
	// A burst: the Events are pushed one by one, then routed in batches.
	b.Run("push_burst_then_route", func(b *testing.B) {
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

// BenchmarkSchedulerStart measures the scheduler's overhead per Execution
// start (the start transaction with lease and Execution, Run with one
// fenced persist, the transaction marking it running), beside a baseline
// of one bare write transaction (a Work update) in the same run.
func BenchmarkSchedulerStart(b *testing.B) {
	ctx := context.Background()
	setup := func(b *testing.B) *harness {
		h := newHarness(b, runtime.Config{
			Bindings:  map[string]runtime.Binding{"b": {Executor: "parked"}},
			Executors: map[string]runtime.Executor{"parked": parkedExecutor{}},
			Pools:     map[string]int{runtime.PoolJob: 1 << 30},
		})
		return h
	}
	putWork := func(h *harness, id string) runtime.Work {
		var w runtime.Work
		err := h.store.Transact(ctx, func(tx runtime.Tx) error {
			var err error
			w, err = tx.PutWork(runtime.Work{ID: id, ScopeID: "s1", Kind: "task", Binding: "b", State: runtime.WorkPending})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	b.Run("baseline_write", func(b *testing.B) {
		h := setup(b)
		w := putWork(h, "w")
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
		h := setup(b)
		var total time.Duration
		for i := range b.N {
			b.StopTimer()
			putWork(h, fmt.Sprint("w", i))
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
