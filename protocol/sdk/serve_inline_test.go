package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// calcManifest declares calc's two handler operations: calc.pure, served
// by a Pure function, and calc.handler, by a Handler.
const calcManifest = `{"name":"calc","version":"1.0.0","command":["calc"],"protocol":[1],` +
	`"provides":{"operations":[{"name":"calc.pure","kind":"handler"},{"name":"calc.handler","kind":"handler"}]}}`

// calc is an extension whose operations record how the transport served
// each call (servedHow) and answer by their input: "block" waits for
// release, "conflict", "wrapped", "detail" and "panic" fail so, and
// anything else is echoed. calc.handler with "sequence" calls the host
// first.
type calc struct {
	mu       sync.Mutex
	served   map[string][]string // how each call was served, by operation
	events   []string
	started  chan struct{} // closed as a "block" call starts
	release  chan struct{} // a "block" call returns once it is closed
	sequence chan struct{} // closed as a "sequence" call starts
}

func newCalc() *calc {
	return &calc{served: map[string][]string{}, started: make(chan struct{}), release: make(chan struct{}), sequence: make(chan struct{})}
}

func (c *calc) serving(op string) {
	how := servedHow()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.served[op] = append(c.served[op], how)
}

func (c *calc) event(e string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
}

func (c *calc) how(op string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.served[op]...)
}

func (c *calc) answer(call protocol.OperationCallParams) (protocol.OperationCallResult, error) {
	var in string
	_ = json.Unmarshal(call.Input, &in)
	switch in {
	case "block":
		c.event("block started")
		close(c.started)
		<-c.release
		c.event("block returned")
	case "after":
		c.event("after served")
	case "conflict":
		return protocol.OperationCallResult{}, protocol.NewError(protocol.CodeConflict, "stale revision")
	case "wrapped":
		return protocol.OperationCallResult{}, fmt.Errorf("saving %s: %w", call.RequestID, protocol.NewError(protocol.CodeConflict, "stale revision"))
	case "detail":
		return protocol.OperationCallResult{}, errors.New("secret detail")
	case "panic":
		panic("boom")
	}
	return protocol.OperationCallResult{Output: call.Input}, nil
}

func (c *calc) extension() *sdk.Extension {
	return &sdk.Extension{
		Manifest: []byte(calcManifest),
		Operations: map[string]sdk.Operation{
			"calc.pure": {Pure: func(call protocol.OperationCallParams) (protocol.OperationCallResult, error) {
				c.serving("calc.pure")
				return c.answer(call)
			}},
			"calc.handler": {Handler: func(ctx context.Context, h *sdk.Host, call protocol.OperationCallParams) (protocol.OperationCallResult, error) {
				c.serving("calc.handler")
				if string(call.Input) == `"sequence"` {
					close(c.sequence)
					if _, err := h.Sequence(ctx); err != nil {
						return protocol.OperationCallResult{}, err
					}
				}
				return c.answer(call)
			}},
		},
		Logf: func(string, ...any) {},
	}
}

// servedHow says how the transport serves the calling handler: "inline"
// (on the reader, no goroutine and no deadline of its own,
// jsonrpc.Options.Inline), "eager" (started on the reader under its
// deadline, jsonrpc.Options.Eager) or "goroutine".
func servedHow() string {
	buf := make([]byte, 64<<10)
	stack := string(buf[:runtime.Stack(buf, false)])
	switch {
	case strings.Contains(stack, "jsonrpc.(*Conn).serveInline"):
		return "inline"
	case strings.Contains(stack, "jsonrpc.(*Conn).serveEager"):
		return "eager"
	}
	return "goroutine"
}

func calcCall(op, input string) protocol.OperationCallParams {
	return protocol.OperationCallParams{Operation: op, RequestID: "r-1", Input: json.RawMessage(input), Authority: protocol.Authority{ScopeID: "s"}}
}

// A Pure operation's call is served on the reader itself, without a
// goroutine or a deadline timer (Inline); a Handler's is started on the
// reader under the deadline (Eager). Params that name the Pure operation
// only as a first member, with a folded member naming the Handler after it
// (which encoding/json reads: it folds case and keeps the last), are the
// Handler's call, started Eager, and its host call is answered. The
// negative controls: with Inline off a Pure call is Eager too, and with a
// naive scan (the first "operation" member) the Handler of the hostile
// params runs Inline and its host call is never answered, since nothing
// reads while it waits.
func TestPureOperationServedInline(t *testing.T) {
	hostile := json.RawMessage(`{"operation":"calc.pure","Operation":"calc.handler","input":"sequence","authority":{"scope_id":"s"}}`)
	for _, c := range []struct {
		name                string
		inlineOff, naive    bool
		pure, hostileServed string // how calc.pure's calls are served, and the hostile call
	}{
		{name: "as served", pure: "inline", hostileServed: "eager"},
		{name: "negative control: Inline off", inlineOff: true, pure: "eager", hostileServed: "eager"},
		{name: "negative control: the first operation member", naive: true, pure: "inline", hostileServed: "inline"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.inlineOff {
				t.Cleanup(sdk.SetInlinePure(false))
			}
			if c.naive {
				t.Cleanup(sdk.SetFirstOperationName())
			}
			ext := newCalc()
			host := servedOverPipes(t, ext.extension())
			for i := range 20 {
				for _, op := range []string{"calc.pure", "calc.handler"} {
					var res protocol.OperationCallResult
					in := fmt.Sprintf(`{"n":%d}`, i)
					require.NoError(t, host.Call(t.Context(), "operation.call", calcCall(op, in), &res))
					assert.JSONEq(t, in, string(res.Output))
				}
			}
			assert.Equal(t, repeat(c.pure, 20), ext.how("calc.pure"))
			assert.Equal(t, repeat("eager", 20), ext.how("calc.handler"))

			wait := 10 * time.Second
			if c.hostileServed == "inline" {
				wait = 300 * time.Millisecond // it cannot be answered: the reader waits in it
			}
			ctx, done := context.WithTimeout(t.Context(), wait)
			defer done()
			var res protocol.OperationCallResult
			err := host.Call(ctx, "operation.call", hostile, &res)
			<-ext.sequence
			assert.Equal(t, []string{c.hostileServed}, ext.how("calc.handler")[20:], "the hostile call is the Handler's")
			if c.hostileServed == "inline" {
				assert.ErrorIs(t, err, context.DeadlineExceeded, "a host call made on the reader got its answer")
				return
			}
			require.NoError(t, err)
			assert.JSONEq(t, `"sequence"`, string(res.Output))
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// A Pure operation that blocks holds up the stream: the call behind it is
// read, and served, only once it returned. That is what Pure promises not
// to do; Inline off (the negative control), the blocked call is handed on
// at the Eager deadline and the call behind it is served meanwhile.
func TestBlockingPureOperationHoldsUpTheStream(t *testing.T) {
	for _, inline := range []bool{true, false} {
		t.Run(map[bool]string{true: "as served", false: "negative control: Inline off"}[inline], func(t *testing.T) {
			t.Cleanup(sdk.SetInlinePure(inline))
			ext := newCalc()
			host := servedOverPipes(t, ext.extension())
			released := false
			release := func() {
				if !released {
					released = true
					close(ext.release)
				}
			}
			t.Cleanup(release) // before ServeConn is waited for
			blocked := make(chan error, 1)
			go func() { blocked <- host.Call(t.Context(), "operation.call", calcCall("calc.pure", `"block"`), nil) }()
			<-ext.started

			wait := 10 * time.Second
			if inline {
				wait = 300 * time.Millisecond // it cannot be answered: the reader is held
			}
			ctx, done := context.WithTimeout(t.Context(), wait)
			defer done()
			err := host.Call(ctx, "operation.call", calcCall("calc.pure", `"after"`), nil)
			if inline {
				assert.ErrorIs(t, err, context.DeadlineExceeded, "a call behind a blocked Pure operation was answered")
			} else {
				assert.NoError(t, err)
			}
			release()
			require.NoError(t, <-blocked)
			// The call behind is served in the end either way; an
			// answer after its caller gave up is dropped.
			require.NoError(t, host.Call(t.Context(), "operation.call", calcCall("calc.pure", `"after"`), nil))
			ext.mu.Lock()
			events := ext.events
			ext.mu.Unlock()
			if inline {
				assert.Equal(t, []string{"block started", "block returned", "after served", "after served"}, events)
			} else {
				assert.Equal(t, []string{"block started", "after served", "block returned", "after served"}, events)
			}
		})
	}
}

// A Pure operation's answers and errors cross as a Handler's do, code for
// code and word for word: an authored error keeps its code and message
// (with a wrapper's context), an unauthored one and a panic cross as
// internal without their detail, malformed params are refused as invalid,
// an operation the manifest does not declare as undeclared. The Pure
// operation's calls are served Inline, so the comparison holds the Inline
// path to the Handler's; with Inline off (the negative control) they are
// not, and the check on how they were served tells.
func TestPureOperationErrorsCrossAsAHandlersDo(t *testing.T) {
	calls := []json.RawMessage{
		mustJSON(t, calcCall("OP", `"echo me"`)),
		mustJSON(t, calcCall("OP", `"conflict"`)),
		mustJSON(t, calcCall("OP", `"wrapped"`)),
		mustJSON(t, calcCall("OP", `"detail"`)),
		mustJSON(t, calcCall("OP", `"panic"`)),
		json.RawMessage(`{"operation":"OP","input":1,"authority":"s"}`), // authority of the wrong type
		json.RawMessage(`{"operation":"OP","input":[1,` + strings.Repeat(`"long input",`, 1<<16) + `2]}`),
		json.RawMessage(`{"operation":"OP.missing","input":1}`),
	}
	answers := func(t *testing.T, op string) (out, how []string) {
		ext := newCalc()
		host := servedOverPipes(t, ext.extension())
		for _, call := range calls {
			params := json.RawMessage(strings.ReplaceAll(string(call), `"OP`, `"`+op))
			var res json.RawMessage
			err := host.Call(t.Context(), "operation.call", params, &res)
			msg := strings.ReplaceAll(fmt.Sprint(err), op, "OP")
			out = append(out, fmt.Sprintf("%.40s %s %s", res, protocol.CodeOf(err), msg))
		}
		return out, ext.how(op)
	}
	for _, inline := range []bool{true, false} {
		t.Run(map[bool]string{true: "as served", false: "negative control: Inline off"}[inline], func(t *testing.T) {
			t.Cleanup(sdk.SetInlinePure(inline))
			handler, _ := answers(t, "calc.handler")
			pure, how := answers(t, "calc.pure")
			assert.Equal(t, handler, pure)
			// Every call that reached the operation (all but the
			// malformed and the missing one).
			if inline {
				assert.Equal(t, repeat("inline", 6), how, "how the Pure operation was served")
			} else {
				assert.Equal(t, repeat("eager", 6), how, "how the Pure operation was served")
			}
			assert.Contains(t, pure[0], `{"output":"echo me"}`)
			assert.Contains(t, pure[1], "conflict")
			assert.Contains(t, pure[1], "stale revision")
			assert.Contains(t, pure[2], "saving r-1: ")
			for _, i := range []int{3, 4} {
				assert.Contains(t, pure[i], "internal")
				assert.NotContains(t, pure[i], "secret")
				assert.NotContains(t, pure[i], "boom")
			}
			assert.Contains(t, pure[5], "invalid")
			assert.Contains(t, pure[6], `{"output":[1,"long input"`)
			assert.Contains(t, pure[7], "undeclared")
		})
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// A Pure operation's call counts towards the bound like any request: with
// the bound of Handler calls in flight it is answered overloaded, and once
// they are answered it is served again. The negative control has room for
// one more, and the same call is served while the others wait.
func TestPureOperationKeepsTheBound(t *testing.T) {
	const bound = 4
	for _, room := range []int{0, 1} {
		t.Run(map[int]string{0: "as served", 1: "negative control: room for one more"}[room], func(t *testing.T) {
			t.Cleanup(sdk.SetMaxInflight(bound + room))
			started := make(chan struct{}, bound)
			release := make(chan struct{})
			ext := newCalc().extension()
			ext.Operations["calc.handler"] = sdk.Operation{Handler: func(ctx context.Context, _ *sdk.Host, call protocol.OperationCallParams) (protocol.OperationCallResult, error) {
				started <- struct{}{}
				<-release
				return protocol.OperationCallResult{Output: call.Input}, nil
			}}
			host := servedOverPipes(t, ext)
			var once sync.Once
			unblock := func() { once.Do(func() { close(release) }) }
			t.Cleanup(unblock)
			results := make(chan error, bound)
			for range bound {
				go func() { results <- host.Call(t.Context(), "operation.call", calcCall("calc.handler", `1`), nil) }()
			}
			for range bound {
				<-started
			}
			var res protocol.OperationCallResult
			err := host.Call(t.Context(), "operation.call", calcCall("calc.pure", `"at the bound"`), &res)
			if room == 0 {
				require.Error(t, err, "a Pure call over the bound")
				assert.Equal(t, protocol.CodeOverloaded, protocol.CodeOf(err))
			} else {
				require.NoError(t, err)
				assert.JSONEq(t, `"at the bound"`, string(res.Output))
			}
			unblock()
			for range bound {
				assert.NoError(t, <-results)
			}
			require.NoError(t, host.Call(t.Context(), "operation.call", calcCall("calc.pure", `"below"`), &res), "below the bound again")
			assert.JSONEq(t, `"below"`, string(res.Output))
		})
	}
}

// In process a Pure operation is called as a Handler is, and its errors
// cross the same way.
func TestPureOperationAttached(t *testing.T) {
	ext := newCalc()
	c, err := sdk.Attach(ext.extension(), sdktest.New())
	require.NoError(t, err)
	ctx := t.Context()
	require.NoError(t, c.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}}, nil))
	var res protocol.OperationCallResult
	require.NoError(t, c.Call(ctx, "operation.call", calcCall("calc.pure", `{"a":1}`), &res))
	assert.JSONEq(t, `{"a":1}`, string(res.Output))
	assert.ErrorIs(t, c.Call(ctx, "operation.call", calcCall("calc.pure", `"conflict"`), nil), protocol.ErrConflict)
	assert.Equal(t, []string{"goroutine", "goroutine"}, ext.how("calc.pure"), "no transport in process")
}

// Pure serves a handler operation, instead of Handler: both set, or Pure
// on an operation of another kind, is refused when serving starts.
func TestPureOperationMustMatchTheManifest(t *testing.T) {
	pure := func(protocol.OperationCallParams) (protocol.OperationCallResult, error) {
		return protocol.OperationCallResult{}, nil
	}
	both := newCalc().extension()
	op := both.Operations["calc.handler"]
	op.Pure = pure
	both.Operations["calc.handler"] = op
	_, err := sdk.Attach(both, sdktest.New())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `operation "calc.handler" sets both Handler and Pure: set one`)

	wait := &sdk.Extension{
		Manifest: []byte(`{"name":"w","version":"1.0.0","command":["w"],"protocol":[1],` +
			`"provides":{"operations":[{"name":"w.wait","kind":"wait"}]}}`),
		Operations: map[string]sdk.Operation{"w.wait": {Pure: pure}},
	}
	_, err = sdk.Attach(wait, sdktest.New())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `operation "w.wait" (kind handler) has a handler but the manifest does not declare it`)
	assert.Contains(t, err.Error(), `the manifest declares operation "w.wait" (kind wait) but its handler is nil`)
}
