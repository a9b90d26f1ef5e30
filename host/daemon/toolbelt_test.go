package daemon

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

func newTestToolbelt(t *testing.T) *toolbelt {
	t.Helper()
	tb, err := newToolbelt(shortDir(t), nil, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return tb
}

// A token names one attempt at its epoch; any change to it, or a token of
// another daemon's key, is refused alike.
func TestToolbeltTokenNamesOneAttemptAtItsEpoch(t *testing.T) {
	tb := newTestToolbelt(t)
	token := tb.token("ex_0123", 3)
	id, epoch, err := tb.parseToken(token)
	require.NoError(t, err)
	assert.Equal(t, "ex_0123", id)
	assert.Equal(t, int64(3), epoch)

	parts := strings.Split(token, ".")
	other := newTestToolbelt(t)
	for name, bad := range map[string]string{
		"another epoch":      strings.Join([]string{parts[0], parts[1], "4", parts[3]}, "."),
		"another execution":  strings.Join([]string{parts[0], "ex_0124", parts[2], parts[3]}, "."),
		"epoch written long": strings.Join([]string{parts[0], parts[1], "03", parts[3]}, "."),
		"zero epoch":         strings.Join([]string{parts[0], parts[1], "0", parts[3]}, "."),
		"another version":    strings.Join([]string{"otb2", parts[1], parts[2], parts[3]}, "."),
		"altered MAC":        strings.Join([]string{parts[0], parts[1], parts[2], strings.Repeat("A", len(parts[3]))}, "."),
		"another key":        other.token("ex_0123", 3),
		"extra part":         token + ".x",
		"empty":              "",
		"not base64":         strings.Join([]string{parts[0], parts[1], parts[2], "!!!"}, "."),
	} {
		_, _, err := tb.parseToken(bad)
		assert.ErrorIs(t, err, runtime.ErrUnauthorized, name)
		assert.Equal(t, errBadToken, err, "%s: the refusal says nothing of what was wrong", name)
	}
}

// A toolbelt call is read strictly; each refusal is invalid.
func TestToolbeltCallIsReadStrictly(t *testing.T) {
	req, err := decodeToolbeltCall(strings.NewReader(`{"operation":"notes.add","request_id":"r1","input":{"title":"x"}}`))
	require.NoError(t, err)
	assert.Equal(t, "notes.add", req.Operation)
	assert.Equal(t, "r1", req.RequestID)
	assert.JSONEq(t, `{"title":"x"}`, string(req.Input))

	for name, body := range map[string]string{
		"unknown member":   `{"operation":"notes.add","authority":{"scope_id":"other"}}`,
		"repeated member":  `{"operation":"notes.publish","operation":"notes.add"}`,
		"trailing value":   `{"operation":"notes.add"} {"operation":"notes.add"}`,
		"not an object":    `["notes.add"]`,
		"no operation":     `{"input":{}}`,
		"bad operation":    `{"operation":"../x"}`,
		"invalid UTF-8":    "{\"operation\":\"notes.add\",\"input\":\"\xff\"}",
		"not JSON":         `{"operation":`,
		"over the limit":   `{"operation":"notes.add","input":"` + strings.Repeat("x", protocol.MaxToolbeltCallBytes) + `"}`,
		"empty":            ``,
		"input not JSON":   `{"operation":"notes.add","input":nope}`,
		"operation number": `{"operation":7}`,
	} {
		_, err := decodeToolbeltCall(strings.NewReader(body))
		assert.ErrorIs(t, err, runtime.ErrInvalid, name)
	}
}

// Each refusal crosses with the code a caller can act on, and nothing
// unexpected crosses with its detail.
func TestToolbeltRefusals(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{errBadToken, http.StatusForbidden, "unauthorized"},
		{runtime.ErrUnauthorized, http.StatusForbidden, "unauthorized"},
		{runtime.ErrInvalid, http.StatusBadRequest, "invalid"},
		{runtime.ErrNotFound, http.StatusNotFound, "not_found"},
		{runtime.ErrCausalLimit, http.StatusTooManyRequests, "causal_limit"},
		{&runtime.OperationError{Code: "note_locked", Message: "the note is locked"}, http.StatusUnprocessableEntity, "note_locked"},
		{runtime.ErrUnsupported, http.StatusNotImplemented, "unsupported"},
		{protocol.Errorf(protocol.CodeUnsupported, "no"), http.StatusBadGateway, "unsupported"},
		{errors.New("disk on fire at /secret/path"), http.StatusInternalServerError, "internal"},
	} {
		status, te := toolbeltRefusal(c.err)
		assert.Equal(t, c.status, status, c.err.Error())
		assert.Equal(t, c.code, te.Code, c.err.Error())
	}
	_, te := toolbeltRefusal(errors.New("disk on fire at /secret/path"))
	assert.Equal(t, "internal error", te.Message, "an unexpected error's detail stays in the log")
}

// A daemon whose toolbelt socket cannot be served issues no token: the run
// fails to start, saying why, rather than running without its toolbelt.
func TestToolbeltUnservedRefusesToIssue(t *testing.T) {
	tb, err := newToolbelt("/"+strings.Repeat("d", maxSocketPath), nil, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Error(t, tb.listen("/"+strings.Repeat("d", maxSocketPath)))
	_, err = tb.Issue("ex_1", 1)
	assert.ErrorIs(t, err, runtime.ErrUnsupported)
	assert.Contains(t, err.Error(), "use a shorter state directory")
}

func FuzzToolbeltCall(f *testing.F) {
	for _, seed := range []string{
		`{"operation":"notes.add","request_id":"r1","input":{"title":"x"}}`,
		`{"operation":"notes.add","operation":"notes.publish"}`,
		`{"operation":"a","unknown":1}`,
		`{"operation":"a"} []`, `[]`, `null`, ``, `{"operation":"a","input":"\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeToolbeltCall(strings.NewReader(string(body)))
		if err != nil {
			require.ErrorIs(t, err, runtime.ErrInvalid)
			return
		}
		require.True(t, validOperationName(req.Operation), req.Operation)
		if len(req.Input) > 0 {
			require.True(t, strings.TrimSpace(string(req.Input)) != "")
		}
	})
}

// What the endpoint answers before any engine is asked: a GET, a call
// without a bearer token or with a forged one, and a call beyond the bound
// of calls at once.
func TestToolbeltEndpointRefusesBeforeTheEngine(t *testing.T) {
	tb := newTestToolbelt(t)
	call := func(method, auth string) (int, *protocol.ToolbeltCallResponse) {
		r := httptest.NewRequest(method, protocol.ToolbeltCallPath, strings.NewReader(`{"operation":"notes.add"}`))
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		tb.serveCall(w, r)
		var resp protocol.ToolbeltCallResponse
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &resp))
		return w.Code, &resp
	}
	status, resp := call(http.MethodGet, "")
	assert.Equal(t, http.StatusMethodNotAllowed, status)
	assert.Equal(t, "invalid", resp.Error.Code)
	status, resp = call(http.MethodPost, "")
	assert.Equal(t, http.StatusForbidden, status)
	assert.Equal(t, "unauthorized", resp.Error.Code)
	status, resp = call(http.MethodPost, "Bearer "+newTestToolbelt(t).token("ex_1", 1))
	assert.Equal(t, http.StatusForbidden, status, "a token of another key")
	assert.Equal(t, "unauthorized", resp.Error.Code)
	assert.Empty(t, resp.Output)

	for range maxToolbeltCalls {
		tb.slots <- struct{}{}
	}
	status, resp = call(http.MethodPost, "Bearer "+tb.token("ex_1", 1))
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, "overloaded", resp.Error.Code)
}
