package conformance_test

// The ingress, toolbelt and executor suites run here in process against
// simple reference implementations, and against negative controls that
// each must fail.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

func openSuiteStore(t *testing.T) func() (runtime.Store, error) {
	return func() (runtime.Store, error) { return sqlite.Open(t.TempDir()) }
}

// Ingress.

// refSource is the reference ingress source over a fixture upstream.
type refSource struct {
	items []conformance.IngressItem // sorted by ID
	// completeEarly reports the first page complete (negative control).
	completeEarly bool
	// unstable stamps each scan into the payload (negative control).
	unstable bool
	mu       sync.Mutex
	scans    int
}

func newRefSource(items []conformance.IngressItem) *refSource {
	s := &refSource{items: append([]conformance.IngressItem(nil), items...)}
	sort.Slice(s.items, func(i, j int) bool { return s.items[i].ID < s.items[j].ID })
	return s
}

func (s *refSource) envelope(it conformance.IngressItem) runtime.Envelope {
	body := map[string]any{"item": it.ID, "body": it.Body}
	if s.unstable {
		s.mu.Lock()
		body["scan"] = s.scans
		s.mu.Unlock()
	}
	b, _ := json.Marshal(body)
	return runtime.Envelope{Source: "ref", DeliveryID: it.ID + "@" + it.Version, Family: "ref.item", Payload: b}
}

func (s *refSource) Push(_ context.Context, d runtime.Delivery) ([]runtime.Envelope, error) {
	var items []conformance.IngressItem
	if err := json.Unmarshal(d.Body, &items); err != nil {
		return nil, fmt.Errorf("delivery body: %w", err)
	}
	var out []runtime.Envelope
	for _, it := range items {
		out = append(out, s.envelope(it))
	}
	return out, nil
}

func (s *refSource) Reconcile(_ context.Context, req runtime.ReconcileRequest) (runtime.ReconcilePage, error) {
	start := 0
	if req.Cursor != "" {
		var err error
		if start, err = strconv.Atoi(req.Cursor); err != nil {
			return runtime.ReconcilePage{}, fmt.Errorf("bad cursor %q", req.Cursor)
		}
	} else {
		s.mu.Lock()
		s.scans++
		s.mu.Unlock()
	}
	end := min(start+req.Limit, len(s.items))
	var p runtime.ReconcilePage
	for _, it := range s.items[start:end] {
		p.Observations = append(p.Observations, runtime.Observation{Item: it.ID, Version: it.Version, Envelope: s.envelope(it)})
	}
	if end >= len(s.items) || s.completeEarly {
		p.Complete = true
		p.Checkpoint = strconv.Itoa(len(s.items))
	} else {
		p.Next = strconv.Itoa(end)
	}
	return p, nil
}

func ingressDriver(t *testing.T, spoil func(*refSource)) conformance.IngressDriver {
	return conformance.IngressDriver{
		Name: "ref",
		NewSource: func(_ context.Context, items []conformance.IngressItem) (runtime.IngressSource, error) {
			s := newRefSource(items)
			if spoil != nil {
				spoil(s)
			}
			return s, nil
		},
		Deliver: func(items []conformance.IngressItem) runtime.Delivery {
			b, _ := json.Marshal(items)
			return runtime.Delivery{ID: "push", Body: b}
		},
		NewStore: openSuiteStore(t),
	}
}

func TestIngressSuiteReference(t *testing.T) {
	conformance.RunIngress(t, ingressDriver(t, nil))
}

func TestIngressSuiteNegativeControls(t *testing.T) {
	for _, c := range []struct {
		name  string
		spoil func(*refSource)
		check string
	}{
		{"complete on a partial scan", func(s *refSource) { s.completeEarly = true }, "scan_complete"},
		{"content changes under a stable identity", func(s *refSource) { s.unstable = true }, "scan_stable_identity"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := conformance.CheckIngress(t.Context(), ingressDriver(t, c.spoil))
			require.Error(t, err, "the suite passed a weakened source")
			assert.Contains(t, err.Error(), c.check)
		})
	}
}

// Toolbelt.

// refOperation posts a "comment" per request: it records its intent under
// the request ID and looks for it before acting, so a retry after a lost
// commit makes the effect once. careless skips the look-up (negative
// control).
type refOperation struct {
	careless bool
	mu       sync.Mutex
	intents  map[string]bool
	effects  int
}

func (o *refOperation) Handle(_ context.Context, call runtime.Call) (json.RawMessage, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.intents == nil {
		o.intents = map[string]bool{}
	}
	if call.RequestID == "" || o.careless || !o.intents[call.RequestID] {
		o.effects++
		o.intents[call.RequestID] = true
	}
	return json.RawMessage(`{"posted":true}`), nil
}

func (o *refOperation) count(context.Context) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.effects, nil
}

func toolbeltDriver(t *testing.T, careless bool) conformance.ToolbeltDriver {
	return conformance.ToolbeltDriver{
		New: func(context.Context) (conformance.ToolbeltTarget, error) {
			op := &refOperation{careless: careless}
			return conformance.ToolbeltTarget{
				Name: "ref.comment", Operation: op,
				Owner:   runtime.Emitter{Name: "ref", Scopes: []string{conformance.ToolbeltScope}},
				Input:   json.RawMessage(`{"text":"hello"}`),
				Effects: op.count,
			}, nil
		},
		NewStore: openSuiteStore(t),
	}
}

func TestToolbeltSuiteReference(t *testing.T) {
	conformance.RunToolbelt(t, toolbeltDriver(t, false))
}

// refWaitOperation subscribes upstream once per request, then declares a
// Wait on the subscription's key.
type refWaitOperation struct{ refOperation }

func (o *refWaitOperation) PlanWait(ctx context.Context, call runtime.Call) (runtime.WaitRequest, json.RawMessage, error) {
	res, err := o.Handle(ctx, call)
	return runtime.WaitRequest{Keys: []string{"ref:" + call.RequestID}, Description: "subscription"}, res, err
}

func TestToolbeltSuiteWaitOperation(t *testing.T) {
	d := toolbeltDriver(t, false)
	d.New = func(context.Context) (conformance.ToolbeltTarget, error) {
		op := &refWaitOperation{}
		return conformance.ToolbeltTarget{
			Name: "ref.subscribe", Operation: op,
			Owner:   runtime.Emitter{Name: "ref", Scopes: []string{conformance.ToolbeltScope}},
			Effects: op.count,
		}, nil
	}
	conformance.RunToolbelt(t, d)
}

func TestToolbeltSuiteNegativeControl(t *testing.T) {
	err := conformance.CheckToolbelt(t.Context(), toolbeltDriver(t, true))
	require.Error(t, err, "the suite passed a handler that is not idempotent on the request ID")
	assert.Contains(t, err.Error(), "replay_window")
}

// Executor.

// refExecutor is the reference executor: its runs are detached (they
// outlive its "process"), addressed by execution ID, and adopted by
// Recover from the metadata they persisted. lossy forgets its runs on a
// crash (negative control).
type refExecutor struct {
	lossy bool

	mu    sync.Mutex
	runs  map[string]*refRun
	crash chan struct{}
}

type refRun struct {
	done   chan struct{}
	result runtime.RunResult
	once   sync.Once
}

func (r *refRun) end(res runtime.RunResult) {
	r.once.Do(func() {
		r.result = res
		close(r.done)
	})
}

type refMeta struct {
	Run string `json:"run"`
}

func newRefExecutor(lossy bool) *refExecutor {
	return &refExecutor{lossy: lossy, runs: map[string]*refRun{}, crash: make(chan struct{})}
}

func (x *refExecutor) Run(ctx context.Context, req runtime.RunRequest) (runtime.RunHandle, error) {
	meta, _ := json.Marshal(refMeta{Run: req.ExecutionID})
	if err := req.PersistRecovery(ctx, meta); err != nil {
		return nil, err // the host's own error, so its refusal propagates
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	r := &refRun{done: make(chan struct{})}
	x.runs[req.ExecutionID] = r
	return &refHandle{run: r, crash: x.crash}, nil
}

func (x *refExecutor) Recover(_ context.Context, req runtime.RecoverRequest) (runtime.RunHandle, error) {
	var meta refMeta
	if err := json.Unmarshal(req.Recovery, &meta); err != nil {
		return nil, fmt.Errorf("%w: %v", runtime.ErrNotAdoptable, err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	r, ok := x.runs[meta.Run]
	if !ok {
		return nil, fmt.Errorf("%w: no run %q", runtime.ErrNotAdoptable, meta.Run)
	}
	return &refHandle{run: r, crash: x.crash}, nil
}

func (x *refExecutor) Stop(_ context.Context, executionID string, _ int64) error {
	x.mu.Lock()
	r, ok := x.runs[executionID]
	x.mu.Unlock()
	if ok {
		r.end(runtime.RunResult{State: runtime.ExecutionStopped})
	}
	return nil
}

func (x *refExecutor) Crash(context.Context) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	close(x.crash)
	x.crash = make(chan struct{})
	if x.lossy {
		x.runs = map[string]*refRun{}
	}
	return nil
}

func (x *refExecutor) Finish(_ context.Context, executionID string, state runtime.ExecutionState) error {
	x.mu.Lock()
	r, ok := x.runs[executionID]
	x.mu.Unlock()
	if !ok {
		return nil // a lost run: finishing it changes nothing the executor knows
	}
	r.end(runtime.RunResult{State: state})
	return nil
}

type refHandle struct {
	run   *refRun
	crash chan struct{}
}

func (h *refHandle) Wait(ctx context.Context) (runtime.RunResult, error) {
	// A run that has ended reports its end even across a crash.
	select {
	case <-h.run.done:
		return h.run.result, nil
	default:
	}
	select {
	case <-h.run.done:
		return h.run.result, nil
	case <-h.crash:
		return runtime.RunResult{}, runtime.ErrExecutorCrashed
	case <-ctx.Done():
		return runtime.RunResult{}, ctx.Err()
	}
}

func executorDriver(t *testing.T, lossy bool) conformance.ExecutorDriver {
	return conformance.ExecutorDriver{
		New: func(context.Context) (conformance.ExecutorTarget, error) {
			x := newRefExecutor(lossy)
			return conformance.ExecutorTarget{Executor: x, Crash: x.Crash, Finish: x.Finish}, nil
		},
		NewStore: openSuiteStore(t),
	}
}

func TestExecutorSuiteReference(t *testing.T) {
	conformance.RunExecutor(t, executorDriver(t, false))
}

func TestExecutorSuiteNegativeControl(t *testing.T) {
	err := conformance.CheckExecutor(t.Context(), executorDriver(t, true))
	require.Error(t, err, "the suite passed an executor whose Recover loses the run")
	assert.Contains(t, err.Error(), "crash_then_recover")
	assert.Contains(t, err.Error(), "scheduler_adopts_after_crash")
}

// The suites' timeouts are variables a slow machine may raise.
var _ = []*time.Duration{&conformance.IngressCheckTimeout, &conformance.ToolbeltCheckTimeout, &conformance.ExecutorCheckTimeout}
