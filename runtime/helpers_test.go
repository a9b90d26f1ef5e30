package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/runtimetest"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// harness is an engine over a real SQLite store and a fake clock.
type harness struct {
	store  runtime.Store
	clock  *runtimetest.FakeClock
	engine *runtime.Engine
	errs   *errorLog
}

type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *errorLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

func openStore(t testing.TB, clock *runtimetest.FakeClock) runtime.Store {
	t.Helper()
	s, err := sqlite.Open(t.TempDir(), sqlite.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// newHarness builds an engine from cfg, filling its store and clock.
func newHarness(t testing.TB, cfg runtime.Config) *harness {
	t.Helper()
	clock := runtimetest.NewFakeClock(t0)
	if cfg.Store == nil {
		cfg.Store = openStore(t, clock)
	}
	return attach(t, cfg, clock)
}

// attach builds another engine over cfg.Store (a restarted daemon).
func attach(t testing.TB, cfg runtime.Config, clock *runtimetest.FakeClock) *harness {
	t.Helper()
	h := &harness{store: cfg.Store, clock: clock, errs: &errorLog{}}
	cfg.Clock = clock
	cfg.OnError = h.errs.add
	e, err := runtime.New(cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	h.engine = e
	return h
}

func (h *harness) view(t testing.TB, fn func(r runtime.ReadTx) error) {
	t.Helper()
	require.NoError(t, h.store.View(context.Background(), fn))
}

func (h *harness) work(t testing.TB, id string) runtime.Work {
	t.Helper()
	var w runtime.Work
	h.view(t, func(r runtime.ReadTx) error {
		var err error
		w, err = r.Work(id)
		return err
	})
	return w
}

func (h *harness) works(t testing.TB) []runtime.Work {
	t.Helper()
	var ws []runtime.Work
	h.view(t, func(r runtime.ReadTx) error {
		var err error
		ws, err = r.Works(runtime.WorkFilter{})
		return err
	})
	return ws
}

func (h *harness) executions(t testing.TB, workID string) []runtime.Execution {
	t.Helper()
	var xs []runtime.Execution
	h.view(t, func(r runtime.ReadTx) error {
		var err error
		xs, err = r.Executions(workID)
		return err
	})
	return xs
}

func (h *harness) latest(t testing.TB) int64 {
	t.Helper()
	var seq int64
	h.view(t, func(r runtime.ReadTx) error {
		var err error
		seq, err = r.LatestSequence()
		return err
	})
	return seq
}

// payload is the test Events' payload: the keyed handler reads it.
type payload struct {
	Key     string           `json:"key,omitempty"`
	Match   bool             `json:"match,omitempty"`
	Display *runtime.Display `json:"display,omitempty"`
	Context json.RawMessage  `json:"context,omitempty"`
	Grants  []string         `json:"grants,omitempty"`
	Fail    bool             `json:"fail,omitempty"`
}

func testEnvelope(source, delivery, scope string, p payload) runtime.Envelope {
	b, _ := json.Marshal(p)
	return runtime.Envelope{Source: source, DeliveryID: delivery, ScopeID: scope, Family: "test.item", Payload: b}
}

// keyedHandler matches Events whose payload says match, correlating by key.
type keyedHandler struct {
	calls atomic.Int64
	// before, when set, runs at the start of each Match (to simulate a
	// concurrent writer between snapshot and apply).
	before func(in runtime.RouteInput)
}

func (h *keyedHandler) Match(_ context.Context, in runtime.RouteInput) (runtime.RouteDecision, error) {
	h.calls.Add(1)
	if h.before != nil {
		h.before(in)
	}
	var p payload
	if len(in.Event.Payload) > 0 {
		if err := json.Unmarshal(in.Event.Payload, &p); err != nil {
			return runtime.RouteDecision{}, err
		}
	}
	if p.Fail {
		return runtime.RouteDecision{}, errors.New("handler failed")
	}
	if !p.Match {
		return runtime.RouteDecision{Reason: "payload says no"}, nil
	}
	d := runtime.RouteDecision{Match: true, Reason: "payload says yes", Display: p.Display, Context: p.Context, Grants: p.Grants}
	if p.Key != "" {
		d.CorrelationKeys = []string{p.Key}
	}
	return d, nil
}

// fakeExecutor runs controllable runs. Its "process" can crash: handles
// of the crashed generation then report ErrExecutorCrashed while the runs
// go on, as a detached process would.
type fakeExecutor struct {
	mu        sync.Mutex
	runs      map[string]*fakeRun
	crash     chan struct{}
	persist   bool  // persist recovery metadata in Run
	runErr    error // returned by Run
	recoverOK bool  // Recover adopts; else ErrNotAdoptable

	started   chan runtime.RunRequest
	recovered chan runtime.RecoverRequest
	stopped   chan string
}

type fakeRun struct {
	id     string
	done   chan struct{}
	result runtime.RunResult
	once   sync.Once
}

func newFakeExecutor() *fakeExecutor {
	return &fakeExecutor{
		runs:      map[string]*fakeRun{},
		crash:     make(chan struct{}),
		persist:   true,
		recoverOK: true,
		started:   make(chan runtime.RunRequest, 100),
		recovered: make(chan runtime.RecoverRequest, 100),
		stopped:   make(chan string, 100),
	}
}

type recoveryMeta struct {
	Run string `json:"run"`
}

func (f *fakeExecutor) Run(ctx context.Context, req runtime.RunRequest) (runtime.RunHandle, error) {
	if f.runErr != nil {
		return nil, f.runErr
	}
	if f.persist {
		meta, _ := json.Marshal(recoveryMeta{Run: req.ExecutionID})
		if err := req.PersistRecovery(ctx, meta); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	r := &fakeRun{id: req.ExecutionID, done: make(chan struct{})}
	f.runs[req.ExecutionID] = r
	crash := f.crash
	f.mu.Unlock()
	f.started <- req
	return &fakeHandle{run: r, crash: crash}, nil
}

func (f *fakeExecutor) Recover(_ context.Context, req runtime.RecoverRequest) (runtime.RunHandle, error) {
	f.recovered <- req
	var meta recoveryMeta
	if err := json.Unmarshal(req.Recovery, &meta); err != nil || !f.recoverOK {
		return nil, fmt.Errorf("%w: run %q", runtime.ErrNotAdoptable, meta.Run)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[meta.Run]
	if !ok {
		return nil, fmt.Errorf("%w: run %q", runtime.ErrNotAdoptable, meta.Run)
	}
	return &fakeHandle{run: r, crash: f.crash}, nil
}

func (f *fakeExecutor) Stop(_ context.Context, executionID string, _ int64) error {
	f.finish(executionID, runtime.RunResult{State: runtime.ExecutionStopped})
	f.stopped <- executionID
	return nil
}

// Crash ends the executor "process": every handle handed out so far
// reports ErrExecutorCrashed.
func (f *fakeExecutor) Crash() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.crash)
	f.crash = make(chan struct{})
}

func (f *fakeExecutor) finish(id string, res runtime.RunResult) {
	f.mu.Lock()
	r := f.runs[id]
	f.mu.Unlock()
	if r == nil {
		return
	}
	r.once.Do(func() {
		r.result = res
		close(r.done)
	})
}

func (f *fakeExecutor) Succeed(id string) {
	f.finish(id, runtime.RunResult{State: runtime.ExecutionSucceeded})
}

func (f *fakeExecutor) Fail(id string) {
	f.finish(id, runtime.RunResult{State: runtime.ExecutionFailed, Error: "boom"})
}

type fakeHandle struct {
	run   *fakeRun
	crash chan struct{}
}

func (h *fakeHandle) Wait(ctx context.Context) (runtime.RunResult, error) {
	select {
	case <-h.run.done:
		return h.run.result, nil
	case <-h.crash:
		return runtime.RunResult{}, runtime.ErrExecutorCrashed
	case <-ctx.Done():
		return runtime.RunResult{}, ctx.Err()
	}
}

// drained receives everything already sent on ch.
func drained[T any](ch chan T) []T {
	var out []T
	for {
		select {
		case v := <-ch:
			out = append(out, v)
		default:
			return out
		}
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
