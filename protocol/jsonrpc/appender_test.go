package jsonrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// appended is an Appender that appends fixed bytes.
type appended string

func (a appended) AppendJSON(buf []byte) ([]byte, error) { return append(buf, a...), nil }

// strictAppended is an appended that declares its output strict.
type strictAppended struct{ appended }

func (strictAppended) AppendsStrictJSON() {}

// A value that appends itself crosses as what it appended, with its line
// breaks as spaces; what breaks the strict rule, or is not JSON, is
// refused before it is sent, as any value's JSON is.
func TestAppenderParams(t *testing.T) {
	aR, bW := io.Pipe()
	bR, aW := io.Pipe()
	var got json.RawMessage
	server := jsonrpc.NewConn(aR, aW, jsonrpc.Methods{
		"take": func(_ context.Context, req *jsonrpc.Request) (any, error) {
			got = append(json.RawMessage(nil), req.Params...)
			return nil, nil
		},
	}, nil)
	client := jsonrpc.NewConn(bR, bW, nil, nil)
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })

	require.NoError(t, client.Call(t.Context(), "take", appended("{\"a\":\n1,\r\"b\":\"x\"}"), nil))
	assert.Equal(t, `{"a": 1, "b":"x"}`, string(got))

	for name, bad := range map[string]appended{
		"invalid UTF-8":      "{\"a\":\"\xff\"}",
		"unpaired surrogate": `{"a":"\ud800"}`,
		"not JSON":           `{"a":`,
		"a raw line break":   "{\"a\":\"x\ny\"}",
		"not structured":     `"text"`,
	} {
		err := client.Call(t.Context(), "take", bad, nil)
		assert.Error(t, err, name)
		assert.NotErrorIs(t, err, jsonrpc.ErrTransport, name)
		var answered *jsonrpc.Error
		assert.False(t, errors.As(err, &answered), "%s: refused here, not by the peer: %v", name, err)
	}

	// A StrictAppender's output is sent unscanned: what the scan would
	// have refused here is refused by the peer, which answers.
	err := client.Call(t.Context(), "take", strictAppended{`{"a":"\ud800"}`}, nil)
	var answered *jsonrpc.Error
	require.ErrorAs(t, err, &answered, "sent, and refused by the peer")
	assert.Equal(t, jsonrpc.CodeInvalidParams, answered.Code)

	// The protocol's chunk params arrive as json.Marshal would have sent them.
	chunk := testChunk()
	p := protocol.ArtifactWriteParams{ArtifactID: "art_1", Offset: 1 << 20, Data: chunk}
	require.NoError(t, client.Call(t.Context(), "take", p, nil))
	want, err := json.Marshal(p)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}

// protocol.ArtifactWriteParams declares its output strict (StrictAppender),
// so the Conn sends it unscanned: whatever the params, what it appends
// keeps the strict rule and holds no line break.
func TestArtifactWriteParamsKeepsTheStrictPromise(t *testing.T) {
	var _ jsonrpc.StrictAppender = protocol.ArtifactWriteParams{}
	for _, id := range []string{"art_0123456789abcdef", "", "a\"\\\n\r\t<>&\u2028\u2029é", "a\xffb\xed\xa0\x80", "\x00\x1f\x7f"} {
		for _, data := range [][]byte{nil, {}, []byte("hello"), make([]byte, 64<<10)} {
			checkStrictPromise(t, protocol.ArtifactWriteParams{ArtifactID: id, Offset: -1 << 62, Data: data})
		}
	}
}

func FuzzArtifactWriteParamsKeepsTheStrictPromise(f *testing.F) {
	f.Add("art_1", int64(0), []byte("hello"))
	f.Add("a\nb\xff", int64(-1), []byte{})
	f.Fuzz(func(t *testing.T, id string, off int64, data []byte) {
		checkStrictPromise(t, protocol.ArtifactWriteParams{ArtifactID: id, Offset: off, Data: data})
	})
}

// protocol.WebhookHandleParams declares its output strict too: whatever
// the request (its header names and values, body and time as a sender or
// a host could make them), what AppendJSON appends keeps the strict rule
// and holds no line break, or it is refused with an error.
func TestWebhookHandleParamsKeepsTheStrictPromise(t *testing.T) {
	var _ jsonrpc.StrictAppender = protocol.WebhookHandleParams{}
	odd := []string{"X-Notes-Signature", "", "a\"\\\n\r\t<>&\u2028\u2029é", "a\xffb\xed\xa0\x80", "\x00\x1f\x7f", "a\xfe", "a\xff"}
	for _, s := range odd {
		for _, t0 := range []time.Time{{}, time.Date(2026, 12, 2, 15, 4, 5, 6, time.FixedZone("X", -3600)), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} {
			headers := map[string][]string{s: {s, ""}, "Content-Type": {"application/json"}, "X-Nil": nil}
			checkWebhookStrictPromise(t, protocol.WebhookHandleParams{Method: s, Path: "/p/" + s, WebhookPath: s, Query: s,
				Headers: headers, Body: []byte(s), ReceivedAt: t0})
		}
	}
	// Names json.Marshal writes alike (each invalid byte as U+FFFD) would
	// be a duplicate key: refused.
	_, err := protocol.WebhookHandleParams{Headers: map[string][]string{"a\xfe": {"1"}, "a\xff": {"2"}}}.AppendJSON(nil)
	assert.Error(t, err)
}

func FuzzWebhookHandleParamsKeepsTheStrictPromise(f *testing.F) {
	f.Add("POST", "X-Notes-Signature", "sha256=00", "a\xff", []byte(`{"notes":[]}`), int64(0))
	f.Add("P\nOST", "a\xfe", "\u2028", "a\xff", []byte{0xff, '\n'}, int64(1)<<62)
	f.Fuzz(func(t *testing.T, method, name, value, name2 string, body []byte, nanos int64) {
		checkWebhookStrictPromise(t, protocol.WebhookHandleParams{Method: method, Path: value, WebhookPath: name2, Query: value,
			Headers: map[string][]string{name: {value}, name2: {method, name}}, Body: body, ReceivedAt: time.Unix(0, nanos)})
	})
}

func checkWebhookStrictPromise(t *testing.T, p protocol.WebhookHandleParams) {
	t.Helper()
	out, err := p.AppendJSON(nil)
	if err != nil {
		return // refused, not sent
	}
	require.NoError(t, jsonrpc.CheckStrict(out), "%q", out)
	require.NotContains(t, string(out), "\n")
	require.NotContains(t, string(out), "\r")
}

func checkStrictPromise(t *testing.T, p protocol.ArtifactWriteParams) {
	t.Helper()
	out, err := p.AppendJSON(nil)
	require.NoError(t, err)
	require.NoError(t, jsonrpc.CheckStrict(out), "%q", out)
	require.NotContains(t, string(out), "\n")
	require.NotContains(t, string(out), "\r")
}

// operation.call's params and result are RawAppenders: the Conn scans
// only their raw member (the input, the output), so the rest must keep the
// strict rule by construction, and a raw member must be held to it alone:
// one that is not a JSON value by itself is refused even where the
// message around it would still parse (an injected member).
func TestOperationCallKeepsTheRawPromise(t *testing.T) {
	var _ jsonrpc.RawAppender = protocol.OperationCallParams{}
	var _ jsonrpc.RawAppender = protocol.OperationCallResult{}
	for _, s := range []string{"bench.echo", "", "a\"\\\n\r\t<>&\u2028\u2029é", "a\xffb\xed\xa0\x80", "\x00\x1f\x7f"} {
		for _, in := range []string{"", `null`, `{"seq":1,"text":"hi"}`, " [1,\n2]\r", `"\u00e9"`} {
			checkRawPromise(t, s, []byte(in))
		}
	}
	for _, bad := range []string{`1,"x":2`, `{"a":1},"x":{"b":2}`, `{"a":`, "\"\xff\"", `"\ud800"`, "1 2"} {
		checkRawPromise(t, "op", []byte(bad))
		p := protocol.OperationCallParams{Operation: "op", Input: json.RawMessage(bad)}
		_, err := p.AppendJSONWith(nil, jsonrpc.AppendRaw)
		assert.Error(t, err, "input %q", bad)
		_, err = protocol.OperationCallResult{Output: json.RawMessage(bad)}.AppendJSONWith(nil, jsonrpc.AppendRaw)
		assert.Error(t, err, "output %q", bad)
	}
}

func FuzzOperationCallKeepsTheRawPromise(f *testing.F) {
	f.Add("bench.echo", []byte(`{"seq":1}`))
	f.Add("a\nb\xff", []byte(`1,"x":2`))
	f.Fuzz(func(t *testing.T, s string, raw []byte) {
		checkRawPromise(t, s, raw)
	})
}

// checkRawPromise holds AppendJSONWith, given the Conn's AppendRaw, to
// AppendJSON: it succeeds exactly when the raw member alone keeps the
// strict rule, and then appends AppendJSON's bytes with line breaks as
// spaces, which keep the strict rule.
func checkRawPromise(t *testing.T, s string, raw []byte) {
	t.Helper()
	rawOK := len(raw) == 0 || jsonrpc.CheckStrict(raw) == nil
	p := protocol.OperationCallParams{Operation: s, RequestID: s, Input: raw,
		Authority: protocol.Authority{ScopeID: s, WorkID: s, ExecutionID: s, Binding: s, Connection: s}}
	for _, v := range []interface {
		AppendJSON([]byte) ([]byte, error)
		AppendJSONWith([]byte, func(buf, raw []byte) ([]byte, error)) ([]byte, error)
	}{p, protocol.OperationCallResult{Output: raw}} {
		got, err := v.AppendJSONWith([]byte("prefix"), jsonrpc.AppendRaw)
		require.Equal(t, rawOK, err == nil, "%T with raw %q: %v", v, raw, err)
		require.Equal(t, "prefix", string(got[:6]), "kept what buf held")
		if err != nil {
			require.Len(t, got, 6, "nothing appended on an error")
			continue
		}
		got = got[6:]
		want, err := v.AppendJSON(nil)
		require.NoError(t, err)
		for i, c := range want {
			if c == '\n' || c == '\r' {
				want[i] = ' '
			}
		}
		require.Equal(t, string(want), string(got))
		require.NoError(t, jsonrpc.CheckStrict(got), "%q", got)
	}
}
