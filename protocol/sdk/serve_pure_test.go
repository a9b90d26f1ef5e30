package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pure handler starts on the reader, but one that blocks neither stalls
// the connection nor misses $/cancel: a route.match waiting for its
// cancellation lets a later route.match be answered meanwhile, and sees
// its cancel. (Served Inline, as before, the later call would wait behind
// it for good and the cancel would never be read: the transport's
// TestEagerBlockingHandlerSeesCancel has that negative control.)
func TestBlockingPureHandlerNeitherStallsNorMissesCancel(t *testing.T) {
	started, seen := make(chan struct{}), make(chan struct{})
	ext := &sdk.Extension{
		Manifest: []byte(`{"name":"pure","version":"1.0.0","command":["pure"],"protocol":[1],` +
			`"provides":{"routes":[{"handler":"pure-slow"}]}}`),
		Routes: map[string]sdk.Route{"pure-slow": {Match: func(ctx context.Context, p protocol.RouteMatchParams) (protocol.RouteMatchResult, error) {
			if string(p.Config) != `{"block":true}` {
				return protocol.RouteMatchResult{Match: true, Kind: "quick"}, nil
			}
			close(started)
			<-ctx.Done()
			close(seen)
			return protocol.RouteMatchResult{}, ctx.Err()
		}}},
		Logf: func(string, ...any) {},
	}
	host := servedOverPipes(t, ext)
	ctx := t.Context()

	match := func(config string) protocol.RouteMatchParams {
		return protocol.RouteMatchParams{Handler: "pure-slow", ScopeID: "s", Config: json.RawMessage(config),
			Event: protocol.Event{ID: "e", Schema: "elsewhere.thing.v1", Payload: json.RawMessage(`{}`)}}
	}
	blockCtx, cancel := context.WithCancel(ctx)
	blocked := make(chan error, 1)
	go func() { blocked <- host.Call(blockCtx, "route.match", match(`{"block":true}`), nil) }()
	<-started

	quickCtx, quickDone := context.WithTimeout(ctx, 5*time.Second)
	defer quickDone()
	var res protocol.RouteMatchResult
	require.NoError(t, host.Call(quickCtx, "route.match", match(`{}`), &res), "a request behind a blocking pure handler is served")
	assert.Equal(t, "quick", res.Kind)

	cancel()
	assert.ErrorIs(t, <-blocked, context.Canceled)
	select {
	case <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the blocking pure handler never saw its $/cancel")
	}
}

// operation.call starts on the reader too, and a handler that blocks
// without calling the host neither stalls the stream nor misses its
// $/cancel: one that waits on its context passes the reading on as it asks
// for the Done channel, at once; one that blocks on anything else is
// handed on at the Eager deadline. Either way the next operation.call is
// answered while it blocks. The negative controls take each mechanism
// away (the deadline an hour off, and the release on Done turned off):
// then the next call gets no answer.
func TestBlockingOperationCallNeitherStallsNorMissesCancel(t *testing.T) {
	for _, c := range []struct {
		name     string
		input    string // "ctx": waits for its cancellation; "chan": on a channel
		deadline time.Duration
		noDone   bool // no release on Done
		answered bool
	}{
		{"waits on ctx", "ctx", 0, false, true},
		{"waits on ctx, deadline an hour off", "ctx", time.Hour, false, true},
		{"negative control: waits on ctx, no release on Done, deadline an hour off", "ctx", time.Hour, true, false},
		{"waits on a channel", "chan", 0, false, true},
		{"negative control: waits on a channel, deadline an hour off", "chan", time.Hour, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.deadline != 0 {
				t.Cleanup(sdk.SetEagerDeadline(c.deadline))
			}
			if c.noDone {
				t.Cleanup(sdk.SetReleaseOnDone(false))
			}
			host, blocked := startBlockingOperation(t, c.input)
			wait := 5 * time.Second
			if !c.answered {
				wait = 300 * time.Millisecond // it cannot be answered: the reader is held
			}
			quickCtx, quickDone := context.WithTimeout(t.Context(), wait)
			defer quickDone()
			var res protocol.OperationCallResult
			err := host.Call(quickCtx, "operation.call", opCall(`"quick"`), &res)
			if !c.answered {
				assert.ErrorIs(t, err, context.DeadlineExceeded, "the blocked handler held the reading")
				return
			}
			require.NoError(t, err, "a call behind a blocking operation is served")
			assert.JSONEq(t, `"quick"`, string(res.Output))
			if c.input != "ctx" {
				return
			}
			blocked.cancel()
			assert.ErrorIs(t, <-blocked.err, context.Canceled)
			select {
			case <-blocked.seen:
			case <-time.After(10 * time.Second):
				t.Fatal("the blocking operation never saw its $/cancel")
			}
		})
	}
}

type blockedCall struct {
	cancel context.CancelFunc
	err    chan error
	seen   chan struct{} // closed when the handler saw its context end
}

func opCall(input string) protocol.OperationCallParams {
	return protocol.OperationCallParams{Operation: "blocker.block", Input: json.RawMessage(input), Authority: protocol.Authority{ScopeID: "s"}}
}

// startBlockingOperation serves an extension whose one operation,
// blocker.block, echoes its input, except the inputs "ctx" (it waits for
// its cancellation) and "chan" (it waits on a channel the test's cleanup
// closes), which block without calling the host. It starts one call with
// input and returns once its handler runs.
func startBlockingOperation(t *testing.T, input string) (*jsonrpc.Conn, blockedCall) {
	started, seen, unblock := make(chan struct{}), make(chan struct{}), make(chan struct{})
	ext := &sdk.Extension{
		Manifest: []byte(`{"name":"blocker","version":"1.0.0","command":["blocker"],"protocol":[1],` +
			`"provides":{"operations":[{"name":"blocker.block","kind":"handler"}]}}`),
		Operations: map[string]sdk.Operation{"blocker.block": {Handler: func(ctx context.Context, _ *sdk.Host, c protocol.OperationCallParams) (protocol.OperationCallResult, error) {
			switch string(c.Input) {
			case `"ctx"`:
				close(started)
				<-ctx.Done()
				close(seen)
				return protocol.OperationCallResult{}, ctx.Err()
			case `"chan"`:
				close(started)
				<-unblock
				return protocol.OperationCallResult{Output: c.Input}, nil
			}
			return protocol.OperationCallResult{Output: c.Input}, nil
		}}},
		Logf: func(string, ...any) {},
	}
	host := servedOverPipes(t, ext)
	t.Cleanup(func() { close(unblock) }) // runs first: a held handler ends before ServeConn is waited for
	ctx, cancel := context.WithCancel(t.Context())
	blocked := blockedCall{cancel: cancel, err: make(chan error, 1), seen: seen}
	go func() { blocked.err <- host.Call(ctx, "operation.call", opCall(`"`+input+`"`), nil) }()
	<-started
	return host, blocked
}

// servedOverPipes serves ext with sdk.ServeConn over a pair of OS pipes
// and returns the host's end, initialized; cleanup closes the host's end
// and waits for ServeConn to return.
func servedOverPipes(t *testing.T, ext *sdk.Extension) *jsonrpc.Conn {
	t.Helper()
	hostR, extW, err := os.Pipe()
	require.NoError(t, err)
	extR, hostW, err := os.Pipe()
	require.NoError(t, err)
	serveCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := sdk.ServeConn(serveCtx, extR, extW, ext)
		if err != nil {
			t.Log("ServeConn:", err)
		}
		done <- err
	}()
	host := jsonrpc.NewConn(hostR, hostW, sdktest.New().Handler(), &jsonrpc.Options{DecodeError: sdk.DecodeError})
	t.Cleanup(func() { host.Close(); stop(); <-done })
	if err := host.Call(t.Context(), "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}}, nil); err != nil {
		t.Fatalf("initialize: %v; ServeConn: %v", err, host.Err())
	}
	return host
}

// An operation's input is the handler's to keep: it aliases the request's
// params (no copy), so the transport must never reuse their memory for a
// later request, whether the call is started Eager (Handler) or served
// Inline (Pure). The negative control turns ReuseParams on, and the inputs
// kept change under the handler (Inline, they alias the read buffer).
func TestOperationInputsAreTheHandlersToKeep(t *testing.T) {
	for _, pure := range []bool{false, true} {
		for _, reuse := range []bool{false, true} {
			name := map[bool]string{false: "Handler", true: "Pure"}[pure] + ", " +
				map[bool]string{false: "as served", true: "negative control: params reused"}[reuse]
			t.Run(name, func(t *testing.T) {
				t.Cleanup(sdk.SetReuseParams(reuse))
				var kept []json.RawMessage // each input as the handler got it, not copied
				keep := func(c protocol.OperationCallParams) (protocol.OperationCallResult, error) {
					kept = append(kept, c.Input) // calls are sequential: no lock needed
					return protocol.OperationCallResult{}, nil
				}
				op := sdk.Operation{Pure: keep}
				if !pure {
					op = sdk.Operation{Handler: func(_ context.Context, _ *sdk.Host, c protocol.OperationCallParams) (protocol.OperationCallResult, error) {
						return keep(c)
					}}
				}
				ext := &sdk.Extension{
					Manifest: []byte(`{"name":"keeper","version":"1.0.0","command":["keeper"],"protocol":[1],` +
						`"provides":{"operations":[{"name":"keeper.keep","kind":"handler"}]}}`),
					Operations: map[string]sdk.Operation{"keeper.keep": op},
					Logf:       func(string, ...any) {},
				}
				host := servedOverPipes(t, ext)
				input := func(i int) string { return fmt.Sprintf(`"input %03d %s"`, i, strings.Repeat("x", i%7)) }
				const calls = 100
				for i := range calls {
					params := protocol.OperationCallParams{Operation: "keeper.keep", Input: json.RawMessage(input(i)), Authority: protocol.Authority{ScopeID: "s"}}
					require.NoError(t, host.Call(t.Context(), "operation.call", params, nil))
				}
				require.Len(t, kept, calls)
				changed := 0
				for i, in := range kept {
					if string(in) != input(i) {
						changed++
					}
				}
				if reuse {
					assert.NotZero(t, changed, "with ReuseParams the kept inputs are overwritten")
				} else {
					assert.Zero(t, changed, "every input the handler kept is still what was sent")
				}
			})
		}
	}
}
