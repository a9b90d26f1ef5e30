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

func TestAuthorityComesFromTheExecution(t *testing.T) {
	ctx := context.Background()
	ex := newFakeExecutor()
	cfg := schedulerConfig(ex)
	cfg.Bindings = map[string]runtime.Binding{"b": {Executor: "fake", Connection: "conn", Operations: []string{"ext.comment"}}}
	h := newHarness(t, cfg)
	w := newWork(t, h, "1", "k")
	start(t, h)
	req := <-ex.started

	auth, err := h.engine.Authority(ctx, req.ExecutionID)
	require.NoError(t, err)
	assert.Equal(t, runtime.Authority{ScopeID: "s1", WorkID: w.ID, ExecutionID: req.ExecutionID, Connection: "conn", Operations: []string{"ext.comment"}}, auth)

	ex.Succeed(req.ExecutionID)
	h.engine.Drain()
	_, err = h.engine.Authority(ctx, req.ExecutionID)
	require.ErrorIs(t, err, runtime.ErrUnauthorized, "an ended run has no authority")
	_, err = h.engine.Authority(ctx, "ex_unknown")
	require.ErrorIs(t, err, runtime.ErrNotFound)
}

func TestCancelWorkStopsItsRun(t *testing.T) {
	ctx := context.Background()
	ex := newFakeExecutor()
	h := newHarness(t, schedulerConfig(ex))
	w := newWork(t, h, "1", "k")
	start(t, h)
	req := <-ex.started
	require.NoError(t, h.engine.CancelWork(ctx, w.ID))
	assert.Equal(t, req.ExecutionID, <-ex.stopped)
	h.engine.Drain()
	assert.Equal(t, runtime.WorkCancelled, h.work(t, w.ID).State)
	xs := h.executions(t, w.ID)
	require.Len(t, xs, 1)
	assert.Equal(t, runtime.ExecutionStopped, xs[0].State)
	assert.Empty(t, start(t, h), "cancelled Work never starts again")
	require.NoError(t, h.engine.CancelWork(ctx, w.ID), "cancelling twice is a no-op")
}

func TestExecutorControlsWithoutSupport(t *testing.T) {
	ctx := context.Background()
	ex := newFakeExecutor()
	h := newHarness(t, schedulerConfig(ex))
	newWork(t, h, "1", "k")
	start(t, h)
	req := <-ex.started
	id := req.ExecutionID
	require.ErrorIs(t, h.engine.Inject(ctx, id, json.RawMessage(`"more"`)), runtime.ErrUnsupported)
	require.ErrorIs(t, h.engine.Interrupt(ctx, id), runtime.ErrUnsupported)
	_, err := h.engine.Attach(ctx, id)
	require.ErrorIs(t, err, runtime.ErrUnsupported)
	_, err = h.engine.Live(ctx, id, 10)
	require.ErrorIs(t, err, runtime.ErrUnsupported)
	require.ErrorIs(t, h.engine.Forget(ctx, id), runtime.ErrConflict, "a running execution is not forgotten")
	ex.Succeed(id)
	h.engine.Drain()
	require.ErrorIs(t, h.engine.Forget(ctx, id), runtime.ErrUnsupported)
	require.ErrorIs(t, h.engine.Inject(ctx, "ex_missing", nil), runtime.ErrNotFound)
}

// resumingExecutor continues a Work's earlier run.
type resumingExecutor struct {
	*fakeExecutor
	resumed chan json.RawMessage
}

func (r *resumingExecutor) Resume(ctx context.Context, req runtime.RunRequest, previous json.RawMessage) (runtime.RunHandle, error) {
	r.resumed <- previous
	return r.Run(ctx, req)
}

func TestStandingWorkResumes(t *testing.T) {
	ex := &resumingExecutor{fakeExecutor: newFakeExecutor(), resumed: make(chan json.RawMessage, 10)}
	cfg := schedulerConfig(ex.fakeExecutor)
	cfg.Executors = map[string]runtime.Executor{"fake": ex}
	cfg.WorkKinds = map[string]runtime.WorkKindPolicy{"task": kindPolicy{standing: true}}
	h := newHarness(t, cfg)
	newWork(t, h, "1", "k")
	start(t, h)
	first := <-ex.started
	assert.Empty(t, drained(ex.resumed), "a first attempt runs")
	ex.Succeed(first.ExecutionID)
	h.engine.Drain()
	accept(t, h, testEnvelope("src", "2", "s1", payload{Match: true, Key: "k"}))
	routeAll(t, h)
	start(t, h)
	second := <-ex.started
	assert.JSONEq(t, `{"run":"`+first.ExecutionID+`"}`, string(<-ex.resumed))
	ex.Succeed(second.ExecutionID)
	h.engine.Drain()
}

type samplingHandler struct {
	keyedHandler
	fail bool
}

func (s *samplingHandler) Samples(_ context.Context, scopeID string, _ runtime.Route, now time.Time) ([]runtime.RouteSample, error) {
	if s.fail {
		return nil, errors.New("samples broke")
	}
	return []runtime.RouteSample{{ID: "opened", Title: "Issue opened", Event: runtime.Envelope{ScopeID: scopeID, OccurredAt: now}}}, nil
}

func TestRouteSamples(t *testing.T) {
	h := newHarness(t, runtime.Config{
		Handlers: map[string]runtime.RouteHandler{"sampling": &samplingHandler{}, "broken": &samplingHandler{fail: true}, "plain": &keyedHandler{}},
		Routes:   map[string][]runtime.Route{"s1": {{Handler: "broken", Kind: "k"}, {Handler: "plain", Kind: "k"}, {Handler: "sampling", Kind: "k"}}},
	})
	samples := h.engine.RouteSamples(context.Background(), "s1")
	require.Len(t, samples, 1)
	assert.Equal(t, "opened", samples[0].ID)
	assert.Equal(t, t0, samples[0].Event.OccurredAt, "written as of the engine's clock")
	require.Len(t, h.errs.all(), 1)
}
