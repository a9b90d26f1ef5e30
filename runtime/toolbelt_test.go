package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

// effectOp makes an external effect (a "comment") keyed by the call's
// request ID: it looks for its intent first, so a retry after a lost
// commit makes the effect once.
type effectOp struct {
	mu      sync.Mutex
	calls   int
	effects map[string]int // intent (request ID) → comment number
	next    int
}

func (o *effectOp) Handle(_ context.Context, call runtime.Call) (json.RawMessage, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	if string(call.Input) == `"refuse"` {
		return nil, &runtime.OperationError{Code: "invalid", Message: "refused input"}
	}
	if o.effects == nil {
		o.effects = map[string]int{}
	}
	n, ok := o.effects[call.RequestID]
	if !ok {
		o.next++
		n = o.next
		o.effects[call.RequestID] = n
	}
	return json.RawMessage(fmt.Sprintf(`{"comment":%d}`, n)), nil
}

func (o *effectOp) counts() (calls, effects int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.calls, len(o.effects)
}

// crashingStore fails the next Transact before anything commits, as a
// crash between a handler's effect and the commit of its result would.
type crashingStore struct {
	runtime.Store
	crashNext atomic.Bool
}

var errCrash = errors.New("daemon crashed before the commit")

func (s *crashingStore) Transact(ctx context.Context, fn func(runtime.Tx) error) error {
	if s.crashNext.CompareAndSwap(true, false) {
		return errCrash
	}
	return s.Store.Transact(ctx, fn)
}

var caller = runtime.Authority{ScopeID: "s1", WorkID: "w", ExecutionID: "x", Operations: []string{"ext.comment", "ext.wait", "ext.emit"}}

func toolbeltHarness(t *testing.T, ops map[string]runtime.OperationSpec) (*harness, *crashingStore) {
	h := newHarness(t, runtime.Config{})
	cs := &crashingStore{Store: h.store}
	return newHarness(t, runtime.Config{Store: cs, Operations: ops}), cs
}

func TestToolbeltReplayWindow(t *testing.T) {
	ctx := context.Background()
	op := &effectOp{}
	h, cs := toolbeltHarness(t, map[string]runtime.OperationSpec{"ext.comment": {Operation: op, Owner: runtime.Emitter{Name: "ext"}}})

	// The call ends after the handler's effect and before its commit.
	cs.crashNext.Store(true)
	_, err := h.engine.Call(ctx, caller, "ext.comment", "req-1", json.RawMessage(`"hi"`))
	require.ErrorIs(t, err, errCrash)
	calls, effects := op.counts()
	assert.Equal(t, 1, calls)
	assert.Equal(t, 1, effects)
	h.view(t, func(r runtime.ReadTx) error {
		_, err := r.ToolResult("req-1")
		assert.ErrorIs(t, err, runtime.ErrNotFound, "nothing committed")
		return nil
	})

	// The retry carries the same request ID: the handler runs again, and
	// keyed by the request ID it makes its effect once.
	res, err := h.engine.Call(ctx, caller, "ext.comment", "req-1", json.RawMessage(`"hi"`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"comment":1}`, string(res))
	calls, effects = op.counts()
	assert.Equal(t, 2, calls, "the window runs the handler again")
	assert.Equal(t, 1, effects, "the effect happened once")

	// Now committed: a retry replays without calling the handler.
	res, err = h.engine.Call(ctx, caller, "ext.comment", "req-1", json.RawMessage(`"hi"`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"comment":1}`, string(res))
	calls, _ = op.counts()
	assert.Equal(t, 2, calls)

	// A new request ID is a new call with its own effect.
	res, err = h.engine.Call(ctx, caller, "ext.comment", "req-2", json.RawMessage(`"hi"`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"comment":2}`, string(res))
}

func TestToolbeltReplaysAnswersAndChecksAuthority(t *testing.T) {
	ctx := context.Background()
	op := &effectOp{}
	h, _ := toolbeltHarness(t, map[string]runtime.OperationSpec{"ext.comment": {Operation: op, Owner: runtime.Emitter{Name: "ext"}}, "ext.wait": {Operation: op}})

	_, err := h.engine.Call(ctx, caller, "ext.comment", "r", json.RawMessage(`"refuse"`))
	var opErr *runtime.OperationError
	require.ErrorAs(t, err, &opErr)
	assert.Equal(t, "invalid", opErr.Code)
	_, err = h.engine.Call(ctx, caller, "ext.comment", "r", json.RawMessage(`"refuse"`))
	require.ErrorAs(t, err, &opErr, "an operation's refusal is an answer and replays")
	calls, _ := op.counts()
	assert.Equal(t, 1, calls)

	_, err = h.engine.Call(ctx, caller, "ext.wait", "r", nil)
	require.ErrorIs(t, err, runtime.ErrConflict, "a request ID names one call")
	_, err = h.engine.Call(ctx, runtime.Authority{Operations: []string{"ext.wait"}}, "ext.comment", "r2", nil)
	require.ErrorIs(t, err, runtime.ErrUnauthorized)
	_, err = h.engine.Call(ctx, caller, "ext.missing", "r3", nil)
	require.ErrorIs(t, err, runtime.ErrNotFound)

	// Without a request ID there is no replay.
	_, err = h.engine.Call(ctx, caller, "ext.comment", "", json.RawMessage(`"x"`))
	require.NoError(t, err)
	_, err = h.engine.Call(ctx, caller, "ext.comment", "", json.RawMessage(`"x"`))
	require.NoError(t, err)
	calls, _ = op.counts()
	assert.Equal(t, 3, calls)
}

// waitOp declares a Wait on the calling Work.
type waitOp struct{ effectOp }

func (o *waitOp) PlanWait(_ context.Context, call runtime.Call) (runtime.WaitRequest, json.RawMessage, error) {
	return runtime.WaitRequest{Keys: []string{"pr:9"}, Description: "checks on PR #9\nand more"}, json.RawMessage(`{"waiting":true}`), nil
}

// emitOp emits a derived note and records it in the same transaction.
type emitOp struct{ effectOp }

type recordCommit struct{}

func (recordCommit) Commit(outcomes []runtime.EmissionOutcome) (runtime.KVBatch, error) {
	ev := outcomes[0].Event
	return runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "notes", Key: "by-id/" + ev.ID, Value: []byte(fmt.Sprint(ev.Sequence))}}}, nil
}

func (o *emitOp) PlanEmit(_ context.Context, call runtime.Call) (runtime.EmitPlan, error) {
	return runtime.EmitPlan{
		Emissions: []runtime.Emission{{Source: "notes", DeliveryID: call.RequestID, ScopeID: "s1", Family: "notes.note"}},
		Commit:    recordCommit{},
		Result:    json.RawMessage(`{"emitted":true}`),
	}, nil
}

func TestToolbeltWaitAndEmitCommitWithResult(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, runtime.Config{
		Handlers: map[string]runtime.RouteHandler{"keyed": &keyedHandler{}},
		Routes:   map[string][]runtime.Route{"s1": {{Handler: "keyed", Kind: "task"}}},
		Operations: map[string]runtime.OperationSpec{
			"ext.wait": {Operation: &waitOp{}, Owner: runtime.Emitter{Name: "ext"}},
			"ext.emit": {Operation: &emitOp{}, Owner: notes},
		},
	})
	w := newWork(t, h, "1", "k")
	auth := caller
	auth.WorkID = w.ID

	res, err := h.engine.Call(ctx, auth, "ext.wait", "w-1", nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"waiting":true}`, string(res))
	var wt runtime.Wait
	h.view(t, func(r runtime.ReadTx) error {
		wt, err = r.ActiveWait(w.ID)
		return err
	})
	assert.Equal(t, "checks on PR #9", wt.Description)
	assert.Equal(t, "ext", wt.Owner)
	_, err = h.engine.Call(ctx, auth, "ext.wait", "w-1", nil)
	require.NoError(t, err, "the replay declares nothing twice")

	res, err = h.engine.Call(ctx, auth, "ext.emit", "e-1", nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"emitted":true}`, string(res))
	id := runtime.EmittedEventID("notes", "e-1")
	h.view(t, func(r runtime.ReadTx) error {
		ev, err := r.Event(id)
		require.NoError(t, err)
		entry, found, err := r.KVGet("notes", "by-id/"+id)
		assert.True(t, found, "the record joined the emission")
		assert.Equal(t, fmt.Sprint(ev.Sequence), string(entry.Value))
		return err
	})
}
