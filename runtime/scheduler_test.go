package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

type kindPolicy struct {
	standing bool
	trigger  func(inputs []runtime.Event) (int, error)
}

func (p kindPolicy) Standing() bool { return p.standing }
func (p kindPolicy) Trigger(inputs []runtime.Event) (int, error) {
	if p.trigger == nil {
		return 0, nil
	}
	return p.trigger(inputs)
}

func schedulerConfig(ex *fakeExecutor) runtime.Config {
	return runtime.Config{
		Handlers:  map[string]runtime.RouteHandler{"keyed": &keyedHandler{}},
		Routes:    map[string][]runtime.Route{"s1": {{Handler: "keyed", Kind: "task", Binding: "b"}}},
		Bindings:  map[string]runtime.Binding{"b": {Executor: "fake", Pool: runtime.PoolJob}},
		Executors: map[string]runtime.Executor{"fake": ex},
		Pools:     map[string]int{runtime.PoolJob: 1},
		Retry:     runtime.RetryPolicy{MaxAttempts: 2, Initial: time.Minute, Max: time.Hour},
	}
}

// newWork accepts and routes one matching Event and returns its Work.
func newWork(t *testing.T, h *harness, delivery, key string) runtime.Work {
	t.Helper()
	evs := accept(t, h, testEnvelope("src", delivery, "s1", payload{Match: true, Key: key}))
	routeAll(t, h)
	return h.work(t, record(t, h, evs[0].ID).WorkID)
}

func start(t *testing.T, h *harness) []runtime.Execution {
	t.Helper()
	xs, err := h.engine.StartPending(context.Background())
	require.NoError(t, err)
	return xs
}

func TestSchedulerRunsWorkWithinCapacity(t *testing.T) {
	ex := newFakeExecutor()
	h := newHarness(t, schedulerConfig(ex))
	w1 := newWork(t, h, "1", "k1")
	w2 := newWork(t, h, "2", "k2")

	xs := start(t, h)
	require.Len(t, xs, 1, "the job pool holds one")
	assert.Equal(t, 1, h.engine.Running(runtime.PoolJob))
	req := <-ex.started
	assert.Equal(t, 1, req.Attempt)
	assert.Equal(t, int64(1), req.Epoch)
	require.Len(t, req.Inputs, 1)
	assert.Equal(t, req.Inputs[0].ID, req.Trigger.ID)
	assert.Empty(t, start(t, h), "no capacity")

	ex.Succeed(req.ExecutionID)
	h.engine.Drain()
	assert.Equal(t, runtime.WorkDone, h.work(t, req.Work.ID).State)
	x := h.executions(t, req.Work.ID)[0]
	assert.Equal(t, runtime.ExecutionSucceeded, x.State)
	assert.JSONEq(t, `{"run":"`+x.ID+`"}`, string(x.Recovery), "recovery persisted through the fenced path")

	require.Len(t, start(t, h), 1)
	req2 := <-ex.started
	assert.NotEqual(t, req.Work.ID, req2.Work.ID)
	assert.ElementsMatch(t, []string{w1.ID, w2.ID}, []string{req.Work.ID, req2.Work.ID})
	ex.Succeed(req2.ExecutionID)
	h.engine.Drain()
	assert.Empty(t, h.errs.all())
}

func TestSchedulerRetriesWithBackoff(t *testing.T) {
	ex := newFakeExecutor()
	h := newHarness(t, schedulerConfig(ex))
	w := newWork(t, h, "1", "k1")

	start(t, h)
	req := <-ex.started
	ex.Fail(req.ExecutionID)
	h.engine.Drain()
	assert.Equal(t, runtime.WorkPending, h.work(t, w.ID).State)
	assert.Empty(t, start(t, h), "held back by the backoff")

	h.clock.Advance(59 * time.Second)
	assert.Empty(t, start(t, h))
	h.clock.Advance(time.Second)
	require.Len(t, start(t, h), 1)
	req = <-ex.started
	assert.Equal(t, 2, req.Attempt)
	ex.Fail(req.ExecutionID)
	h.engine.Drain()
	assert.Equal(t, runtime.WorkFailed, h.work(t, w.ID).State, "out of attempts")
	xs := h.executions(t, w.ID)
	require.Len(t, xs, 2)
	assert.Equal(t, runtime.ExecutionFailed, xs[1].State)
	assert.Equal(t, "boom", xs[1].Error)
}

func TestSchedulerRunErrorIsAFailedAttempt(t *testing.T) {
	ex := newFakeExecutor()
	ex.runErr = errors.New("cannot launch")
	h := newHarness(t, schedulerConfig(ex))
	w := newWork(t, h, "1", "k1")
	start(t, h)
	h.engine.Drain()
	xs := h.executions(t, w.ID)
	require.Len(t, xs, 1)
	assert.Equal(t, runtime.ExecutionFailed, xs[0].State)
	assert.Contains(t, xs[0].Error, "cannot launch")
	assert.Equal(t, runtime.WorkPending, h.work(t, w.ID).State)
	assert.Zero(t, h.engine.Running(runtime.PoolJob))
}

func TestExecutorCrashRecovers(t *testing.T) {
	ex := newFakeExecutor()
	h := newHarness(t, schedulerConfig(ex))
	w := newWork(t, h, "1", "k1")
	start(t, h)
	req := <-ex.started

	ex.Crash()
	rec := <-ex.recovered
	assert.Equal(t, req.ExecutionID, rec.ExecutionID)
	assert.JSONEq(t, `{"run":"`+req.ExecutionID+`"}`, string(rec.Recovery))
	assert.Equal(t, runtime.WorkRunning, h.work(t, w.ID).State, "a crash is not the execution's failure")

	ex.Succeed(req.ExecutionID)
	h.engine.Drain()
	xs := h.executions(t, w.ID)
	require.Len(t, xs, 1, "no new attempt")
	assert.Equal(t, runtime.ExecutionSucceeded, xs[0].State)
	assert.Equal(t, runtime.WorkDone, h.work(t, w.ID).State)
	assert.Empty(t, drained(ex.stopped))
}

func TestNotAdoptableStopsThenRetries(t *testing.T) {
	for _, c := range []struct {
		name      string
		persist   bool
		recoverOK bool
		recovers  int
	}{
		{"recover refuses", true, false, 1},
		{"nothing persisted", false, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex := newFakeExecutor()
			ex.persist, ex.recoverOK = c.persist, c.recoverOK
			h := newHarness(t, schedulerConfig(ex))
			w := newWork(t, h, "1", "k1")
			start(t, h)
			req := <-ex.started

			ex.Crash()
			assert.Equal(t, req.ExecutionID, <-ex.stopped, "stopped before any retry")
			h.engine.Drain()
			assert.Len(t, drained(ex.recovered), c.recovers)
			xs := h.executions(t, w.ID)
			require.Len(t, xs, 1)
			assert.Equal(t, runtime.ExecutionStopped, xs[0].State)
			assert.ErrorContains(t, errors.New(xs[0].Error), "not adoptable")
			assert.Equal(t, runtime.WorkPending, h.work(t, w.ID).State)

			h.clock.Advance(time.Minute)
			require.Len(t, start(t, h), 1)
			next := <-ex.started
			assert.Equal(t, 2, next.Attempt)
			ex.Succeed(next.ExecutionID)
			h.engine.Drain()
			assert.Equal(t, runtime.WorkDone, h.work(t, w.ID).State)
		})
	}
}

// An engine restarts while an attempt runs: the new engine adopts it with
// a new lease epoch, and the old observer, whose epoch is superseded, is
// refused on every write: persisting recovery metadata and recording the
// outcome.
func TestLeaseFencingSupersededObserver(t *testing.T) {
	ctx := context.Background()
	ex := newFakeExecutor()
	cfg := schedulerConfig(ex)
	old := newHarness(t, cfg)
	w := newWork(t, old, "1", "k1")
	start(t, old)
	req := <-ex.started
	require.Equal(t, int64(1), req.Epoch)

	cfg.Store = old.store
	cfg.Holder = "restarted"
	fresh := attach(t, cfg, old.clock)
	adopted, err := fresh.engine.Adopt(ctx)
	require.NoError(t, err)
	require.Len(t, adopted, 1)
	assert.Equal(t, int64(2), adopted[0].Epoch)
	rec := <-ex.recovered
	assert.Equal(t, int64(2), rec.Epoch)

	// The superseded observer's fenced path refuses it.
	err = req.PersistRecovery(ctx, json.RawMessage(`{"run":"forged"}`))
	require.ErrorIs(t, err, runtime.ErrConflict)
	err = old.store.Transact(ctx, func(tx runtime.Tx) error {
		return tx.PersistRecovery(req.ExecutionID, req.Epoch, []byte(`{"run":"forged"}`))
	})
	require.ErrorIs(t, err, runtime.ErrConflict)
	// The current epoch's path is served.
	require.NoError(t, rec.PersistRecovery(ctx, json.RawMessage(`{"run":"`+req.ExecutionID+`"}`)))

	// The run ends: both observers see it; only the current one records.
	ex.Succeed(req.ExecutionID)
	old.engine.Drain()
	fresh.engine.Drain()
	oldErrs := old.errs.all()
	require.Len(t, oldErrs, 1)
	assert.ErrorIs(t, oldErrs[0], runtime.ErrConflict)
	assert.Empty(t, fresh.errs.all())
	xs := fresh.executions(t, w.ID)
	require.Len(t, xs, 1)
	assert.Equal(t, int64(2), xs[0].Epoch)
	assert.Equal(t, runtime.ExecutionSucceeded, xs[0].State)
	assert.Equal(t, runtime.WorkDone, fresh.work(t, w.ID).State)
}

func TestWorkKindTriggerRunsInStartTransaction(t *testing.T) {
	for _, c := range []struct {
		name    string
		trigger func([]runtime.Event) (int, error)
		want    int
	}{
		{"chooses last", func(in []runtime.Event) (int, error) { return len(in) - 1, nil }, 2},
		{"error falls back to first", func([]runtime.Event) (int, error) { return 0, errors.New("x") }, 0},
		{"out of range falls back to first", func([]runtime.Event) (int, error) { return 7, nil }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex := newFakeExecutor()
			cfg := schedulerConfig(ex)
			cfg.WorkKinds = map[string]runtime.WorkKindPolicy{"task": kindPolicy{trigger: c.trigger}}
			h := newHarness(t, cfg)
			evs := accept(t, h,
				testEnvelope("src", "1", "s1", payload{Match: true, Key: "k"}),
				testEnvelope("src", "2", "s1", payload{Match: true, Key: "k"}),
				testEnvelope("src", "3", "s1", payload{Match: true, Key: "k"}),
			)
			routeAll(t, h)
			start(t, h)
			req := <-ex.started
			require.Len(t, req.Inputs, 3)
			assert.Equal(t, evs[c.want].ID, req.Trigger.ID)
			ex.Succeed(req.ExecutionID)
			h.engine.Drain()
		})
	}
}

func TestStandingWorkWaitsForInput(t *testing.T) {
	ex := newFakeExecutor()
	cfg := schedulerConfig(ex)
	cfg.WorkKinds = map[string]runtime.WorkKindPolicy{"task": kindPolicy{standing: true}}
	h := newHarness(t, cfg)
	w := newWork(t, h, "1", "k")
	start(t, h)
	req := <-ex.started
	ex.Succeed(req.ExecutionID)
	h.engine.Drain()
	assert.Equal(t, runtime.WorkWaiting, h.work(t, w.ID).State, "standing Work stays open")

	second := accept(t, h, testEnvelope("src", "2", "s1", payload{Match: true, Key: "k"}))
	routeAll(t, h)
	assert.Equal(t, runtime.WorkPending, h.work(t, w.ID).State)
	start(t, h)
	req = <-ex.started
	require.Len(t, req.Inputs, 1, "only input not yet given")
	assert.Equal(t, second[0].ID, req.Trigger.ID)
	ex.Succeed(req.ExecutionID)
	h.engine.Drain()
}

// Run drives routing, scheduling and timers on its own; the fake clock's
// Advance fires the retry backoff.
func TestRunLoop(t *testing.T) {
	ex := newFakeExecutor()
	h := newHarness(t, schedulerConfig(ex))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.engine.Run(ctx) }()

	accept(t, h, testEnvelope("src", "1", "s1", payload{Match: true, Key: "k"}))
	req := <-ex.started
	ex.Fail(req.ExecutionID)
	h.engine.Drain()
	// The retry backoff is a minute on the fake clock.
	h.clock.Advance(time.Minute)
	next := <-ex.started
	assert.Equal(t, 2, next.Attempt)
	ex.Succeed(next.ExecutionID)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}
