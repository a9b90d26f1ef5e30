package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/runtime"
)

// ToolbeltCheckTimeout bounds each toolbelt check.
var ToolbeltCheckTimeout = 2 * time.Minute

// ToolbeltTarget is one operation under test.
type ToolbeltTarget struct {
	// Name is the operation's name.
	Name string
	// Operation is the operation; it may also be a WaitOperation or an
	// EmitOperation.
	Operation runtime.Operation
	// Owner is the extension providing it (its Waits' owner, its
	// emissions' authority). Its Scopes must include ToolbeltScope.
	Owner runtime.Emitter
	// Input is an input with which each call (each request ID) makes
	// exactly one external effect.
	Input json.RawMessage
	// Effects counts the external effects the operation has made.
	Effects func(ctx context.Context) (int, error)
}

// ToolbeltScope is the scope the toolbelt suite's calls come from.
const ToolbeltScope = "conformance"

// ToolbeltDriver makes fresh operations and stores.
type ToolbeltDriver struct {
	New func(ctx context.Context) (ToolbeltTarget, error)
	// NewStore opens a fresh, empty store; the suite closes it.
	NewStore func() (runtime.Store, error)
}

type toolbeltCheck struct {
	name string
	run  func(ctx context.Context, b *toolbeltBench) error
}

var toolbeltChecks = []toolbeltCheck{
	{"commit_and_replay", checkCommitAndReplay},
	{"replay_window", checkReplayWindow},
	{"distinct_requests", checkDistinctRequests},
	{"no_request_id_no_replay", checkNoRequestID},
	{"unauthorized", checkToolUnauthorized},
}

// CheckToolbelt runs every toolbelt check and returns the failures joined.
func CheckToolbelt(ctx context.Context, d ToolbeltDriver) error {
	return checkAll(ctx, toolbeltSuite(d))
}

// RunToolbelt runs every toolbelt check as a named subtest.
func RunToolbelt(t *testing.T, d ToolbeltDriver) {
	t.Helper()
	runAll(t, toolbeltSuite(d))
}

func toolbeltSuite(d ToolbeltDriver) []namedCheck {
	return bind(toolbeltChecks, func(c toolbeltCheck) namedCheck {
		return namedCheck{name: c.name, run: func(ctx context.Context) error { return runToolbeltCheck(ctx, d, c) }}
	})
}

// toolbeltBench is one check's engine, over a store that can lose the
// next commit, and the operation wrapped to count handler calls.
type toolbeltBench struct {
	engine *runtime.Engine
	store  *lossyStore
	target ToolbeltTarget
	calls  *atomic.Int64
	auth   runtime.Authority
	// anonymous numbers the calls without a request ID.
	anonymous atomic.Int64
}

func runToolbeltCheck(ctx context.Context, d ToolbeltDriver, c toolbeltCheck) (err error) {
	ctx, cancel := context.WithTimeout(ctx, ToolbeltCheckTimeout)
	defer cancel()
	target, err := d.New(ctx)
	if err != nil {
		return fmt.Errorf("new operation: %w", err)
	}
	s, err := d.NewStore()
	if err != nil {
		return fmt.Errorf("opening a store: %w", err)
	}
	defer func() {
		if cerr := s.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	b := &toolbeltBench{store: &lossyStore{Store: s}, target: target, calls: &atomic.Int64{}}
	e, err := runtime.New(runtime.Config{
		Store:      b.store,
		Operations: map[string]runtime.OperationSpec{target.Name: {Operation: countCalls(target.Operation, b.calls), Owner: target.Owner}},
	})
	if err != nil {
		return err
	}
	defer e.Close()
	b.engine = e
	b.auth = runtime.Authority{ScopeID: ToolbeltScope, ExecutionID: "conformance-execution", Operations: []string{target.Name}}
	return c.run(ctx, b)
}

// workFor gives each request its own running Work to call from, so an
// operation that declares a Wait may be called for several requests; a
// call without a request ID gets a new one.
func (b *toolbeltBench) workFor(ctx context.Context, requestID string) (string, error) {
	if requestID == "" {
		requestID = fmt.Sprintf("anonymous-%d", b.anonymous.Add(1))
	}
	id := "conformance-work-" + requestID
	err := b.store.Store.Transact(ctx, func(tx runtime.Tx) error {
		if _, err := tx.Work(id); err == nil {
			return nil
		}
		_, err := tx.PutWork(runtime.Work{ID: id, ScopeID: ToolbeltScope, Kind: "conformance", State: runtime.WorkRunning})
		return err
	})
	return id, err
}

// lossyStore loses the next commit when armed: Transact returns an error
// without committing, as a crash between a handler's effect and the commit
// of its result would.
type lossyStore struct {
	runtime.Store
	loseNext atomic.Bool
}

var errCommitLost = errors.New("conformance: commit lost")

func (s *lossyStore) Transact(ctx context.Context, fn func(runtime.Tx) error) error {
	if s.loseNext.CompareAndSwap(true, false) {
		return errCommitLost
	}
	return s.Store.Transact(ctx, fn)
}

// countCalls wraps op so every handler call (Handle, PlanWait or PlanEmit)
// is counted, keeping the optional interface op implements.
func countCalls(op runtime.Operation, n *atomic.Int64) runtime.Operation {
	switch o := op.(type) {
	case runtime.WaitOperation:
		return countedWait{countedOp{op, n}, o}
	case runtime.EmitOperation:
		return countedEmit{countedOp{op, n}, o}
	}
	return countedOp{op, n}
}

type countedOp struct {
	op runtime.Operation
	n  *atomic.Int64
}

func (c countedOp) Handle(ctx context.Context, call runtime.Call) (json.RawMessage, error) {
	c.n.Add(1)
	return c.op.Handle(ctx, call)
}

type countedWait struct {
	countedOp
	w runtime.WaitOperation
}

func (c countedWait) PlanWait(ctx context.Context, call runtime.Call) (runtime.WaitRequest, json.RawMessage, error) {
	c.n.Add(1)
	return c.w.PlanWait(ctx, call)
}

type countedEmit struct {
	countedOp
	e runtime.EmitOperation
}

func (c countedEmit) PlanEmit(ctx context.Context, call runtime.Call) (runtime.EmitPlan, error) {
	c.n.Add(1)
	return c.e.PlanEmit(ctx, call)
}

func (b *toolbeltBench) call(ctx context.Context, requestID string) (json.RawMessage, error) {
	auth := b.auth
	var err error
	if auth.WorkID, err = b.workFor(ctx, requestID); err != nil {
		return nil, err
	}
	return b.engine.Call(ctx, auth, b.target.Name, requestID, b.target.Input)
}

func (b *toolbeltBench) wantEffects(ctx context.Context, want int, when string) error {
	n, err := b.target.Effects(ctx)
	if err != nil {
		return fmt.Errorf("counting effects: %w", err)
	}
	if n != want {
		return fmt.Errorf("%s: %d effects, want %d", when, n, want)
	}
	return nil
}

func (b *toolbeltBench) wantCalls(want int64, when string) error {
	if n := b.calls.Load(); n != want {
		return fmt.Errorf("%s: the handler ran %d times, want %d", when, n, want)
	}
	return nil
}

func sameResult(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	return reflect.DeepEqual(x, y)
}

func checkCommitAndReplay(ctx context.Context, b *toolbeltBench) error {
	first, err := b.call(ctx, "req-1")
	if err != nil {
		return fmt.Errorf("call: %w", err)
	}
	again, err := b.call(ctx, "req-1")
	if err != nil {
		return fmt.Errorf("retry: %w", err)
	}
	if !sameResult(first, again) {
		return fmt.Errorf("the retry answered %s, the call %s", again, first)
	}
	return errors.Join(b.wantCalls(1, "after a call and its retry"), b.wantEffects(ctx, 1, "after a call and its retry"))
}

func checkReplayWindow(ctx context.Context, b *toolbeltBench) error {
	b.store.loseNext.Store(true)
	if _, err := b.call(ctx, "req-1"); !errors.Is(err, errCommitLost) {
		return fmt.Errorf("a call whose commit is lost: got %v, want the loss", err)
	}
	if _, err := b.call(ctx, "req-1"); err != nil {
		return fmt.Errorf("retry after the lost commit: %w", err)
	}
	return errors.Join(
		b.wantCalls(2, "a retry after a lost commit"),
		b.wantEffects(ctx, 1, "a retry after a lost commit (the handler must be idempotent on the request ID)"),
	)
}

func checkDistinctRequests(ctx context.Context, b *toolbeltBench) error {
	for _, id := range []string{"req-1", "req-2"} {
		if _, err := b.call(ctx, id); err != nil {
			return fmt.Errorf("call %s: %w", id, err)
		}
	}
	return b.wantEffects(ctx, 2, "two calls with distinct request IDs")
}

func checkNoRequestID(ctx context.Context, b *toolbeltBench) error {
	// Without a request ID the engine cannot replay, so the handler runs
	// for each call.
	for range 2 {
		if _, err := b.call(ctx, ""); err != nil {
			return fmt.Errorf("call without request ID: %w", err)
		}
	}
	return b.wantCalls(2, "two calls without a request ID")
}

func checkToolUnauthorized(ctx context.Context, b *toolbeltBench) error {
	auth := b.auth
	auth.Operations = nil
	_, err := b.engine.Call(ctx, auth, b.target.Name, "req-x", b.target.Input)
	if !errors.Is(err, runtime.ErrUnauthorized) {
		return fmt.Errorf("a call the authority does not grant: got %v, want unauthorized", err)
	}
	return errors.Join(b.wantCalls(0, "an unauthorized call"), b.wantEffects(ctx, 0, "an unauthorized call"))
}
