package jsonrpc_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// strictCases break the strict JSON rule once each, somewhere in a request
// that is otherwise well-formed: a string that is not valid UTF-8 (a raw
// byte, or an escape of half a surrogate pair, which a lenient decoder
// turns into U+FFFD) or a number beyond float64. where is what the refusal
// names.
var strictCases = []struct {
	name, line, where string
}{
	{"raw byte in a value", `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"puts":[{"key":"k","value":"a` + "\xff" + `b"}]}}`, "params.puts[0].value"},
	{"raw byte in a key", `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"puts":[{"k` + "\xc3\x28" + `":1}]}}`, "a member name in params.puts[0]"},
	{"truncated sequence", `{"jsonrpc":"2.0","id":1,"method":"echo","params":["` + "\xe2\x82" + `"]}`, "params[0]"},
	{"encoded surrogate", `{"jsonrpc":"2.0","id":1,"method":"echo","params":["` + "\xed\xa0\x80" + `"]}`, "params[0]"},
	{"overlong encoding", `{"jsonrpc":"2.0","id":1,"method":"echo","params":["` + "\xc0\xaf" + `"]}`, "params[0]"},
	{"lone high surrogate escape", `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"v":"\ud800x"}}`, "params.v"},
	{"lone low surrogate escape", `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"v":"\udc00"}}`, "params.v"},
	{"reversed surrogate escapes", `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"v":"\udc00\ud800"}}`, "params.v"},
	{"number over float64", `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"n":1e400}}`, "params.n"},
	{"negative number over float64", `{"jsonrpc":"2.0","id":1,"method":"echo","params":[[-1.8e308]]}`, "params[0][0]"},
	{"integer of 400 digits", `{"jsonrpc":"2.0","id":1,"method":"echo","params":[` + strings.Repeat("9", 400) + `]}`, "params[0]"},
	{"in the method", `{"jsonrpc":"2.0","id":1,"method":"ec` + "\xff" + `ho","params":[]}`, "method"},
	{"in another member", `{"jsonrpc":"2.0","id":1,"method":"echo","extra":{"x":"` + "\x80" + `"}}`, "extra.x"},
}

// TestStrictJSONRefusedAsInvalidParams: each case gets -32602 under its own
// id, without the handler running, with an answer that is valid UTF-8 and
// repeats none of the offending bytes; the connection stays up.
func TestStrictJSONRefusedAsInvalidParams(t *testing.T) {
	for _, c := range strictCases {
		t.Run(c.name, func(t *testing.T) {
			var served atomic.Int32
			p := newRawPeer(t, jsonrpc.HandlerFunc(func(_ context.Context, req *jsonrpc.Request) (any, error) {
				served.Add(1)
				return req.Params, nil
			}), nil)
			p.send(t, c.line)
			line := p.next(t)
			assert.True(t, utf8.ValidString(line), "the answer is UTF-8: %q", line)
			r := decodeLine(t, line)
			assert.JSONEq(t, `1`, string(r.ID))
			require.NotNil(t, r.Error, "%s", line)
			assert.Equal(t, jsonrpc.CodeInvalidParams, r.Error.Code)
			assert.Contains(t, r.Error.Message, c.where)
			assert.Zero(t, served.Load(), "the handler never saw the message")

			p.send(t, `{"jsonrpc":"2.0","id":2,"method":"echo","params":["ok ✓ 😀 \u00e9 \ud83d\ude00",1e308,1e-400]}`)
			r = decodeLine(t, p.next(t))
			require.Nil(t, r.Error, "the connection serves on")
			assert.JSONEq(t, `["ok ✓ 😀 é 😀",1e308,1e-400]`, string(r.Result))
		})
	}
}

// TestStrictJSONInNotificationsAndResponses: a notification that breaks
// the rule is dropped unserved; a response that does fails its call with
// ErrInvalidResponse rather than handing the caller U+FFFD, and the
// connection stays up for both.
func TestStrictJSONInNotificationsAndResponses(t *testing.T) {
	var served atomic.Int32
	p := newRawPeer(t, jsonrpc.Methods{
		"note": func(context.Context, *jsonrpc.Request) (any, error) { served.Add(1); return nil, nil },
		"echo": func(_ context.Context, req *jsonrpc.Request) (any, error) { return req.Params, nil },
	}, nil)
	p.send(t, `{"jsonrpc":"2.0","method":"note","params":{"v":"`+"\xff"+`"}}`)

	for _, answer := range []string{
		`{"jsonrpc":"2.0","id":%d,"result":{"v":"` + "\xff" + `"}}`,
		`{"jsonrpc":"2.0","id":%d,"result":[1e999]}`,
		`{"jsonrpc":"2.0","id":%d,"error":{"code":-32000,"message":"` + "\xfe" + `"}}`,
	} {
		done := make(chan error, 1)
		var out json.RawMessage
		go func() { done <- p.conn.Call(t.Context(), "ask", nil, &out) }()
		var req struct {
			ID int64 `json:"id"`
		}
		require.NoError(t, json.Unmarshal([]byte(p.next(t)), &req))
		p.send(t, strings.Replace(answer, "%d", jsonNumber(req.ID), 1))
		err := <-done
		require.ErrorIs(t, err, jsonrpc.ErrInvalidResponse, "%s", answer)
		assert.NotErrorIs(t, err, jsonrpc.ErrTransport)
		assert.True(t, utf8.ValidString(err.Error()))
		assert.Nil(t, out)
	}

	p.send(t, `{"jsonrpc":"2.0","id":9,"method":"echo","params":["still up"]}`)
	r := decodeLine(t, p.next(t))
	require.Nil(t, r.Error)
	assert.JSONEq(t, `["still up"]`, string(r.Result))
	assert.Zero(t, served.Load(), "the notification was dropped")
}

// TestStrictJSONInTheIDClosesTheConnection: an id that is not valid UTF-8
// cannot be echoed, so it is an unreadable id: an invalid request answered
// with a null id, and the connection closes.
func TestStrictJSONInTheIDClosesTheConnection(t *testing.T) {
	for _, id := range []string{`"a` + "\xff" + `"`, `"\ud800"`, `1e400`} {
		p := newRawPeer(t, echoHandler(), nil)
		p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"echo"}`)
		line := p.next(t)
		assert.True(t, utf8.ValidString(line))
		r := decodeLine(t, line)
		assert.Equal(t, "null", string(r.ID))
		require.NotNil(t, r.Error)
		assert.Equal(t, jsonrpc.CodeInvalidRequest, r.Error.Code)
		assert.Contains(t, r.Error.Message, "strict JSON")
		<-p.conn.Done()
		assert.ErrorIs(t, p.conn.Err(), jsonrpc.ErrProtocol)
	}
}

// TestStrictJSONIsNotSent: the Conn refuses to send what its peer would
// have to refuse: raw params or a raw result that break the rule.
func TestStrictJSONIsNotSent(t *testing.T) {
	p := newRawPeer(t, jsonrpc.Methods{
		"leak": func(context.Context, *jsonrpc.Request) (any, error) {
			return json.RawMessage(`{"v":"` + "\xff" + `"}`), nil
		},
		"wrapped": func(context.Context, *jsonrpc.Request) (any, error) {
			return struct {
				V json.RawMessage `json:"v"`
			}{json.RawMessage(`"` + "\xff" + `"`)}, nil
		},
	}, nil)
	err := p.conn.Call(t.Context(), "echo", json.RawMessage(`["`+"\xff"+`"]`), nil)
	require.Error(t, err)
	assert.NotErrorIs(t, err, jsonrpc.ErrTransport, "nothing was sent; the connection is up")
	require.NoError(t, p.conn.Notify(t.Context(), "ping", nil))
	assert.Equal(t, `{"jsonrpc":"2.0","method":"ping"}`+"\n", p.next(t), "the refused call never reached the wire")

	for _, method := range []string{"leak", "wrapped"} {
		p.send(t, `{"jsonrpc":"2.0","id":3,"method":"`+method+`"}`)
		line := p.next(t)
		assert.True(t, utf8.ValidString(line), "%s: %q", method, line)
		r := decodeLine(t, line)
		require.NotNil(t, r.Error, method)
		assert.Equal(t, jsonrpc.CodeInternal, r.Error.Code, method)
	}
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
