package jsonrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// response is a response line as the tests read it.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func decodeLine(t testing.TB, line string) response {
	t.Helper()
	var r response
	require.NoError(t, json.Unmarshal([]byte(line), &r), "line %q", line)
	require.Equal(t, "2.0", r.JSONRPC)
	return r
}

func echoHandler() jsonrpc.Methods {
	return jsonrpc.Methods{
		"echo": func(_ context.Context, req *jsonrpc.Request) (any, error) { return req.Params, nil },
	}
}

func TestCallAndServeBothWays(t *testing.T) {
	a, b := pipePair(t, echoHandler(), echoHandler(), nil, nil)
	for _, c := range []*jsonrpc.Conn{a, b} {
		var out map[string]string
		require.NoError(t, c.Call(t.Context(), "echo", map[string]string{"k": "v"}, &out))
		assert.Equal(t, map[string]string{"k": "v"}, out)
	}
}

// The spec's flow-control rule: over the bound the receiver answers
// overloaded and its reader goes on, delivering the response a handler in
// flight waits for.
func TestOverloadedWithoutPausingReader(t *testing.T) {
	const bound = jsonrpc.DefaultMaxInflight
	started := make(chan struct{}, bound)
	release := make(chan struct{})
	goNested := make(chan struct{})
	peer := jsonrpc.Methods{
		"block": func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
			started <- struct{}{}
			<-release
			return "released", nil
		},
		"nested": func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
			started <- struct{}{}
			<-goNested
			var out []string
			err := jsonrpc.ConnFromContext(ctx).Call(ctx, "host.echo", []string{"from the peer"}, &out)
			return out, err
		},
	}
	host := jsonrpc.Methods{
		"host.echo": func(_ context.Context, req *jsonrpc.Request) (any, error) { return req.Params, nil },
	}
	h, _ := pipePair(t, host, peer, nil, nil)

	var blocked sync.WaitGroup
	for range bound - 1 {
		blocked.Go(func() {
			var out string
			assert.NoError(t, h.Call(t.Context(), "block", nil, &out))
			assert.Equal(t, "released", out)
		})
	}
	nested := make(chan error, 1)
	var nestedOut []string
	go func() { nested <- h.Call(t.Context(), "nested", nil, &nestedOut) }()
	for range bound {
		<-started
	}

	err := h.Call(t.Context(), "block", nil, nil)
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, jsonrpc.CodeAuthored, rpcErr.Code)
	assert.JSONEq(t, `{"code":"overloaded"}`, string(rpcErr.Data))
	assert.NotErrorIs(t, err, jsonrpc.ErrTransport)

	close(goNested)
	require.NoError(t, <-nested, "the nested callback's response must reach a peer at its bound")
	assert.Equal(t, []string{"from the peer"}, nestedOut)

	close(release)
	blocked.Wait()
	assert.NoError(t, h.Call(t.Context(), "nested", nil, nil), "below the bound again")
}

func TestProtocolErrorsCloseTheConnection(t *testing.T) {
	cases := []struct {
		name     string
		line     string
		wantCode int
	}{
		{"not JSON", `{not json}`, jsonrpc.CodeParseError},
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":"echo"`, jsonrpc.CodeParseError},
		{"trailing garbage", `{"jsonrpc":"2.0","method":"echo"} x`, jsonrpc.CodeParseError},
		{"bad escape", `{"jsonrpc":"2.0","method":"ec\ho"}`, jsonrpc.CodeParseError},
		{"control character", "{\"jsonrpc\":\"2.0\",\"method\":\"e\x01\"}", jsonrpc.CodeParseError},
		{"too long", `{"jsonrpc":"2.0","method":"echo","params":["` + strings.Repeat("x", 2000) + `"]}`, jsonrpc.CodeParseError},
		{"array", `[1,2]`, jsonrpc.CodeInvalidRequest},
		{"no version", `{"id":1,"method":"echo"}`, jsonrpc.CodeInvalidRequest},
		{"old version", `{"jsonrpc":"1.0","id":1,"method":"echo"}`, jsonrpc.CodeInvalidRequest},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"echo"}`, jsonrpc.CodeInvalidRequest},
		{"duplicate member", `{"jsonrpc":"2.0","id":1,"method":"echo","method":"other"}`, jsonrpc.CodeInvalidRequest},
		{"neither request nor response", `{"jsonrpc":"2.0","id":1}`, jsonrpc.CodeInvalidRequest},
		{"scalar params", `{"jsonrpc":"2.0","id":1,"method":"echo","params":3}`, jsonrpc.CodeInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newRawPeer(t, echoHandler(), &jsonrpc.Options{MaxMessageBytes: 1024})
			pending := make(chan error, 1)
			go func() { pending <- p.conn.Call(t.Context(), "echo", []string{"x"}, nil) }()
			p.next(t) // the pending call's request

			p.send(t, c.line)
			r := decodeLine(t, p.next(t))
			require.NotNil(t, r.Error)
			assert.Equal(t, c.wantCode, r.Error.Code)
			_, err := p.out.ReadString('\n')
			assert.Error(t, err, "the Conn must close its output after a protocol error")

			<-p.conn.Done()
			assert.ErrorIs(t, p.conn.Err(), jsonrpc.ErrProtocol)
			assert.ErrorIs(t, p.conn.Err(), jsonrpc.ErrTransport)
			assert.ErrorIs(t, <-pending, jsonrpc.ErrTransport)
		})
	}
}

func TestLongLineWithinBound(t *testing.T) {
	a, _ := pipePair(t, nil, echoHandler(), nil, nil)
	big := strings.Repeat("0123456789abcdef", 3<<20/16) // longer than the read buffer
	var out []string
	require.NoError(t, a.Call(t.Context(), "echo", []string{big}, &out))
	assert.Equal(t, []string{big}, out)
}

func TestCancelAnswersAndReachesHandler(t *testing.T) {
	seen := make(chan struct{})
	p := newRawPeer(t, jsonrpc.Methods{
		"block": func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
			<-ctx.Done()
			close(seen)
			return nil, ctx.Err()
		},
	}, nil)
	p.send(t, `{"jsonrpc":"2.0","id":"req-5","method":"block"}`)
	p.send(t, `{"jsonrpc":"2.0","method":"$/cancel","params":{"id":"req-5"}}`)
	<-seen
	r := decodeLine(t, p.next(t))
	assert.JSONEq(t, `"req-5"`, string(r.ID))
	require.NotNil(t, r.Error)
	assert.Equal(t, jsonrpc.CodeCancelled, r.Error.Code)
}

func TestLateAnswerAfterCancelIsDropped(t *testing.T) {
	var logged []string
	var mu sync.Mutex
	p := newRawPeer(t, nil, &jsonrpc.Options{Logf: func(f string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(f, args...))
	}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.conn.Call(ctx, "slow", nil, nil) }()
	var req struct {
		ID int64 `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(p.next(t)), &req))
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)

	var cancelMsg struct {
		Method string `json:"method"`
		ID     *int64 `json:"id"`
		Params struct {
			ID int64 `json:"id"`
		} `json:"params"`
	}
	require.NoError(t, json.Unmarshal([]byte(p.next(t)), &cancelMsg))
	assert.Equal(t, "$/cancel", cancelMsg.Method)
	assert.Nil(t, cancelMsg.ID, "$/cancel is a notification")
	assert.Equal(t, req.ID, cancelMsg.Params.ID)

	p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":"late"}`, req.ID))
	next := make(chan error, 1)
	var out string
	go func() { next <- p.conn.Call(t.Context(), "fresh", nil, &out) }()
	var req2 struct {
		ID int64 `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(p.next(t)), &req2))
	assert.NotEqual(t, req.ID, req2.ID)
	p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":"fresh"}`, req2.ID))
	require.NoError(t, <-next)
	assert.Equal(t, "fresh", out)
	mu.Lock()
	assert.Contains(t, strings.Join(logged, "\n"), "dropped a response")
	mu.Unlock()
}

func TestBrokenStreamFailsPendingAndLaterCalls(t *testing.T) {
	for _, how := range []string{"end of input", "close"} {
		t.Run(how, func(t *testing.T) {
			p := newRawPeer(t, nil, nil)
			const n = 3
			errs := make(chan error, n)
			for range n {
				go func() { errs <- p.conn.Call(t.Context(), "pending", nil, nil) }()
			}
			for range n {
				p.next(t)
			}
			if how == "close" {
				require.NoError(t, p.conn.Close())
			} else {
				require.NoError(t, p.in.Close())
			}
			for range n {
				err := <-errs
				assert.ErrorIs(t, err, jsonrpc.ErrTransport)
				var rpcErr *jsonrpc.Error
				assert.False(t, errors.As(err, &rpcErr), "a broken stream is not an answer")
			}
			<-p.conn.Done()
			assert.ErrorIs(t, p.conn.Call(t.Context(), "later", nil, nil), jsonrpc.ErrTransport)
			assert.ErrorIs(t, p.conn.Notify(t.Context(), "later", nil), jsonrpc.ErrTransport)
		})
	}
}

func TestNotificationHasNoResponse(t *testing.T) {
	noted := make(chan json.RawMessage, 1)
	p := newRawPeer(t, jsonrpc.Methods{
		"note": func(_ context.Context, req *jsonrpc.Request) (any, error) {
			noted <- req.Params
			return "an answer nobody asked for", errors.New("and an error")
		},
		"ping": func(context.Context, *jsonrpc.Request) (any, error) { return "pong", nil },
	}, nil)
	p.send(t, `{"jsonrpc":"2.0","method":"note","params":{"n":1}}`)
	assert.JSONEq(t, `{"n":1}`, string(<-noted))
	p.send(t, `{"jsonrpc":"2.0","id":7,"method":"ping"}`)
	r := decodeLine(t, p.next(t))
	assert.JSONEq(t, `7`, string(r.ID), "the first line written answers the request, not the notification")
	assert.JSONEq(t, `"pong"`, string(r.Result))
}

func TestNotifySends(t *testing.T) {
	p := newRawPeer(t, nil, nil)
	require.NoError(t, p.conn.Notify(t.Context(), "event", map[string]int{"n": 2}))
	assert.JSONEq(t, `{"jsonrpc":"2.0","method":"event","params":{"n":2}}`, p.next(t))
}

func TestIDsUniquePerSender(t *testing.T) {
	p := newRawPeer(t, nil, nil)
	const goroutines, calls = 16, 40
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range calls {
				assert.NoError(t, p.conn.Call(t.Context(), "m", nil, nil))
			}
		})
	}
	seen := map[int64]bool{}
	for range goroutines * calls {
		var req struct {
			ID int64 `json:"id"`
		}
		require.NoError(t, json.Unmarshal([]byte(p.next(t)), &req))
		assert.False(t, seen[req.ID], "id %d sent twice", req.ID)
		seen[req.ID] = true
		p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":null}`, req.ID))
	}
	wg.Wait()
	assert.Len(t, seen, goroutines*calls)
}

func TestResponsesInAnyOrder(t *testing.T) {
	p := newRawPeer(t, nil, nil)
	results := make([]chan string, 3)
	for i := range results {
		results[i] = make(chan string, 1)
		go func() {
			var out string
			assert.NoError(t, p.conn.Call(t.Context(), "m", []int{i}, &out))
			results[i] <- out
		}()
	}
	type req struct {
		ID     int64 `json:"id"`
		Params []int `json:"params"`
	}
	var reqs []req
	for range results {
		var r req
		require.NoError(t, json.Unmarshal([]byte(p.next(t)), &r))
		reqs = append(reqs, r)
	}
	for i := len(reqs) - 1; i >= 0; i-- {
		p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":"answer %d"}`, reqs[i].ID, reqs[i].Params[0]))
	}
	for i, ch := range results {
		assert.Equal(t, fmt.Sprintf("answer %d", i), <-ch)
	}
}

// authored is an error of the shape the protocol package's errors have.
type authored struct{ code, msg string }

func (a authored) Error() string   { return a.msg }
func (a authored) WireNumber() int { return jsonrpc.CodeAuthored }
func (a authored) WireData() (string, any) {
	return a.msg, map[string]string{"code": a.code}
}

func TestHandlerErrorsOnTheWire(t *testing.T) {
	const secret = "secret detail"
	cases := []struct {
		name     string
		err      error
		wantCode int
		wantMsg  string
		wantData string
	}{
		{"authored", fmt.Errorf("context: %w", authored{"conflict", "revision is stale"}), jsonrpc.CodeAuthored, "revision is stale", `{"code":"conflict"}`},
		{"unauthored", errors.New(secret), jsonrpc.CodeInternal, "internal error", ""},
		{"invalid params", fmt.Errorf("%w: want an object", jsonrpc.ErrInvalidParams), jsonrpc.CodeInvalidParams, "invalid params: want an object", ""},
		{"method not found", jsonrpc.ErrMethodNotFound, jsonrpc.CodeMethodNotFound, "method not found", ""},
		{"peer error passed on", &jsonrpc.Error{Code: 7, Message: "seven", Data: json.RawMessage(`[7]`)}, 7, "seven", `[7]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logged strings.Builder
			var mu sync.Mutex
			a, _ := pipePair(t, nil, jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
				return nil, c.err
			}), nil, &jsonrpc.Options{Logf: func(f string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				fmt.Fprintf(&logged, f+"\n", args...)
			}})
			err := a.Call(t.Context(), "m", nil, nil)
			var rpcErr *jsonrpc.Error
			require.ErrorAs(t, err, &rpcErr)
			assert.Equal(t, c.wantCode, rpcErr.Code)
			assert.Equal(t, c.wantMsg, rpcErr.Message)
			if c.wantData == "" {
				assert.Empty(t, rpcErr.Data)
			} else {
				assert.JSONEq(t, c.wantData, string(rpcErr.Data))
			}
			assert.NotContains(t, err.Error(), secret)
			if c.name == "unauthored" {
				mu.Lock()
				assert.Contains(t, logged.String(), secret, "the detail stays in this side's log")
				mu.Unlock()
			}
		})
	}
}

func TestUnknownMethodAndPanics(t *testing.T) {
	a, _ := pipePair(t, nil, jsonrpc.Methods{
		"panics": func(context.Context, *jsonrpc.Request) (any, error) { panic("boom") },
	}, nil, nil)
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, a.Call(t.Context(), "nope", nil, nil), &rpcErr)
	assert.Equal(t, jsonrpc.CodeMethodNotFound, rpcErr.Code)
	require.ErrorAs(t, a.Call(t.Context(), "panics", nil, nil), &rpcErr)
	assert.Equal(t, jsonrpc.CodeInternal, rpcErr.Code)
	assert.NotContains(t, rpcErr.Message, "boom")
	assert.NoError(t, a.Err(), "a panicking handler does not end the connection")
}

func TestDecodeErrorOption(t *testing.T) {
	errConflict := errors.New("conflict sentinel")
	a, _ := pipePair(t, nil, jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return nil, authored{"conflict", "stale"}
	}), &jsonrpc.Options{DecodeError: func(code int, msg string, data json.RawMessage) error {
		var d struct {
			Code string `json:"code"`
		}
		if code == jsonrpc.CodeAuthored && json.Unmarshal(data, &d) == nil && d.Code == "conflict" {
			return fmt.Errorf("%s: %w", msg, errConflict)
		}
		return nil
	}}, nil)
	err := a.Call(t.Context(), "m", nil, nil)
	assert.ErrorIs(t, err, errConflict)
	assert.EqualError(t, err, "stale: conflict sentinel")
}

func TestRawParamsPassThrough(t *testing.T) {
	p := newRawPeer(t, nil, nil)
	go func() { _ = p.conn.Notify(t.Context(), "m", json.RawMessage("{\"a\":\n[1,\r\n2]}")) }()
	assert.Equal(t, `{"jsonrpc":"2.0","method":"m","params":{"a": [1,  2]}}`+"\n", p.next(t))

	for _, bad := range []any{json.RawMessage(`{"a":`), "a string", 3, json.RawMessage(`"raw string"`)} {
		err := p.conn.Call(t.Context(), "m", bad, nil)
		require.Error(t, err, "params %v", bad)
		assert.NotErrorIs(t, err, jsonrpc.ErrTransport, "bad params are the caller's mistake, not the stream's")
	}
	assert.NoError(t, p.conn.Err())
}

func TestNilHandlerAnswersMethodNotFound(t *testing.T) {
	p := newRawPeer(t, nil, nil)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"anything"}`)
	r := decodeLine(t, p.next(t))
	require.NotNil(t, r.Error)
	assert.Equal(t, jsonrpc.CodeMethodNotFound, r.Error.Code)
}

// Under ReuseParams a handler may still answer with its params: they are
// sent before their memory is reused.
func TestReuseParamsKeepsAnswersIntact(t *testing.T) {
	a, _ := pipePair(t, nil, echoHandler(), nil, &jsonrpc.Options{ReuseParams: true})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				in := []string{fmt.Sprintf("%d/%d", g, i), strings.Repeat(string(rune('a'+g)), 100*i)}
				var out []string
				if assert.NoError(t, a.Call(t.Context(), "echo", in, &out)) {
					assert.Equal(t, in, out)
				}
			}
		})
	}
	wg.Wait()
}

// A message over the bound is refused before it is sent, and the
// connection goes on: the peer would otherwise have to close it.
func TestOversizeMessagesAreNotSent(t *testing.T) {
	big := strings.Repeat("x", 2048)
	a, _ := pipePair(t, nil, jsonrpc.Methods{
		"big":  func(context.Context, *jsonrpc.Request) (any, error) { return []string{big}, nil },
		"echo": func(_ context.Context, req *jsonrpc.Request) (any, error) { return req.Params, nil },
	}, &jsonrpc.Options{MaxMessageBytes: 1024}, &jsonrpc.Options{MaxMessageBytes: 1024})

	err := a.Call(t.Context(), "echo", []string{big}, nil)
	assert.ErrorIs(t, err, jsonrpc.ErrTooLarge)
	assert.NotErrorIs(t, err, jsonrpc.ErrTransport)
	assert.ErrorIs(t, a.Notify(t.Context(), "echo", []string{big}), jsonrpc.ErrTooLarge)

	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, a.Call(t.Context(), "big", nil, nil), &rpcErr)
	assert.Equal(t, jsonrpc.CodeInternal, rpcErr.Code)

	var out []string
	require.NoError(t, a.Call(t.Context(), "echo", []string{"small"}, &out))
	assert.Equal(t, []string{"small"}, out)
}
