package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

// within receives from ch, failing the test if nothing comes within ten
// seconds: a deadline, so a stop that is never asked fails rather than
// hangs.
func within[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing arrived within ten seconds")
		panic("unreachable")
	}
}

// refusingWaitExecutor's runs end their observation with ErrNotAdoptable
// once refuse is closed, as the host's adapter's Wait does when the
// restarted extension answers executor.recover not_adoptable.
type refusingWaitExecutor struct {
	*fakeExecutor
	refuse chan struct{}
}

type refusingHandle struct {
	runtime.RunHandle
	refuse chan struct{}
}

func (r refusingWaitExecutor) Run(ctx context.Context, req runtime.RunRequest) (runtime.RunHandle, error) {
	h, err := r.fakeExecutor.Run(ctx, req)
	if err != nil {
		return nil, err
	}
	return refusingHandle{RunHandle: h, refuse: r.refuse}, nil
}

func (h refusingHandle) Wait(ctx context.Context) (runtime.RunResult, error) {
	select {
	case <-h.refuse:
		return runtime.RunResult{}, fmt.Errorf("%w: the restarted executor cannot adopt the run", runtime.ErrNotAdoptable)
	case <-ctx.Done():
		return runtime.RunResult{}, ctx.Err()
	}
}

// A run whose observation ends in not_adoptable (the executor's process
// restarted and could not adopt it: spec "Crash and reconnect", the
// executor.* row) is stopped, the stop confirmed, and the Work retried,
// as after a daemon restart. Before, the observer took it for the run's
// failure: no stop was asked, so whatever was left of the run was never
// confirmed gone.
func TestWaitNotAdoptableStopsThenRetries(t *testing.T) {
	ex := newFakeExecutor()
	rw := refusingWaitExecutor{fakeExecutor: ex, refuse: make(chan struct{})}
	cfg := schedulerConfig(ex)
	cfg.Executors = map[string]runtime.Executor{"fake": rw}
	h := newHarness(t, cfg)
	w := newWork(t, h, "1", "k1")
	start(t, h)
	req := <-ex.started

	close(rw.refuse)
	assert.Equal(t, req.ExecutionID, within(t, ex.stopped), "stopped before any retry")
	h.engine.Drain()
	xs := h.executions(t, w.ID)
	require.Len(t, xs, 1)
	assert.Equal(t, runtime.ExecutionStopped, xs[0].State)
	assert.ErrorContains(t, errors.New(xs[0].Error), "not adoptable")
	assert.Equal(t, runtime.WorkPending, h.work(t, w.ID).State)

	h.clock.Advance(time.Minute)
	require.Len(t, start(t, h), 1)
	assert.Equal(t, 2, (<-ex.started).Attempt)
}

// unknownRunExecutor's Stop knows no run: the host's adapter answers so
// for an execution that persisted no recovery metadata, since no run of
// it was ever named to the executor it now talks to.
type unknownRunExecutor struct {
	*fakeExecutor
	stops chan string
}

func (u unknownRunExecutor) Stop(_ context.Context, executionID string, _ int64) error {
	u.stops <- executionID
	return fmt.Errorf("%w: no run of execution %q", runtime.ErrNotFound, executionID)
}

// An attempt adopted after a restart with no recovery metadata (the
// daemon died between the start's commit and the executor's first
// persist) is not adoptable, and its executor knows no run of it to stop:
// the stop finds nothing, so the attempt ends stopped and the Work is
// retried. Before, the not-found stop was a failed stop and the Work
// stayed running for good (drill kill-point-lease-write).
func TestNotAdoptableWithoutARunToStopRetries(t *testing.T) {
	ctx := context.Background()
	ex := newFakeExecutor()
	ex.persist = false
	cfg := schedulerConfig(ex)
	old := newHarness(t, cfg)
	w := newWork(t, old, "1", "k1")
	start(t, old)
	<-ex.started

	u := unknownRunExecutor{fakeExecutor: ex, stops: make(chan string, 10)}
	cfg.Executors = map[string]runtime.Executor{"fake": u}
	cfg.Store = old.store
	h := attach(t, cfg, old.clock)
	adopted, err := h.engine.Adopt(ctx)
	require.NoError(t, err)
	require.Len(t, adopted, 1)
	h.engine.WaitAdopted()
	assert.Equal(t, adopted[0].ID, within(t, u.stops), "the stop was asked")
	h.engine.Drain()
	xs := h.executions(t, w.ID)
	require.Len(t, xs, 1)
	assert.Equal(t, runtime.ExecutionStopped, xs[0].State)
	assert.ErrorContains(t, errors.New(xs[0].Error), "persisted no recovery metadata")
	assert.Equal(t, runtime.WorkPending, h.work(t, w.ID).State, "retried, not left running")
}

// stoplessExecutor is an executor whose Stop is ErrUnsupported, as the
// host's adapter answers for one that declares no stop control (the
// agent, whose runs end with its process).
type stoplessExecutor struct {
	*fakeExecutor
	stops chan string
}

func (s stoplessExecutor) Stop(_ context.Context, executionID string, _ int64) error {
	s.stops <- executionID
	return fmt.Errorf("%w: executor fake does not declare stop", runtime.ErrUnsupported)
}

// A run that cannot be adopted, of an executor that cannot stop, is taken
// as ended: stopped and retried, as one without Stop at all. Before, the
// unsupported stop was a failed stop, and the attempt stayed running for
// good (every agent run a daemon kill interrupted).
func TestNotAdoptableWithoutStopRetries(t *testing.T) {
	ex := newFakeExecutor()
	ex.persist = false // nothing to adopt from
	sl := stoplessExecutor{fakeExecutor: ex, stops: make(chan string, 10)}
	cfg := schedulerConfig(ex)
	cfg.Executors = map[string]runtime.Executor{"fake": sl}
	h := newHarness(t, cfg)
	w := newWork(t, h, "1", "k1")
	start(t, h)
	req := <-ex.started

	ex.Crash()
	assert.Equal(t, req.ExecutionID, <-sl.stops, "the stop was asked")
	h.engine.Drain()
	xs := h.executions(t, w.ID)
	require.Len(t, xs, 1)
	assert.Equal(t, runtime.ExecutionStopped, xs[0].State)
	assert.ErrorContains(t, errors.New(xs[0].Error), "not adoptable")
	assert.Equal(t, runtime.WorkPending, h.work(t, w.ID).State, "retried, not left running")

	h.clock.Advance(time.Minute)
	require.Len(t, start(t, h), 1)
	next := <-ex.started
	assert.Equal(t, 2, next.Attempt)
}
