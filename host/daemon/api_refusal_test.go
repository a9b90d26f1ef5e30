package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/runtime"
)

// TestAPIRefusals: bad input gets its stable code, the code's status, and
// a JSON error body, and writes nothing.
func TestAPIRefusals(t *testing.T) {
	b, c := newAPITest(t)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", c.Socket())
	}}}
	defer hc.CloseIdleConnections()
	trace := "/v1/scopes/" + apiScope + "/route/trace"
	cases := []struct {
		name, method, path, body string
		code                     client.Code
	}{
		{"unknown route", "GET", "/v1/nothing", "", client.CodeNotFound},
		{"outside v1", "GET", "/status", "", client.CodeNotFound},
		{"wrong method", "DELETE", "/v1/status", "", client.CodeMethodNotAllowed},
		{"get on a post route", "GET", trace, "", client.CodeMethodNotAllowed},
		{"unknown query parameter", "GET", "/v1/events?scoop=a", "", client.CodeInvalidRequest},
		{"query parameter twice", "GET", "/v1/events?after=1&after=2", "", client.CodeInvalidRequest},
		{"negative cursor", "GET", "/v1/events?after=-1", "", client.CodeInvalidRequest},
		{"cursor not a number", "GET", "/v1/events?after=x", "", client.CodeInvalidRequest},
		{"limit zero", "GET", "/v1/events?limit=0", "", client.CodeInvalidRequest},
		{"limit over the bound", "GET", "/v1/events?limit=1001", "", client.CodeInvalidRequest},
		{"bad work state", "GET", "/v1/work?state=asleep", "", client.CodeInvalidRequest},
		{"unknown event", "GET", "/v1/events/nope", "", client.CodeNotFound},
		{"unknown work", "GET", "/v1/work/nope", "", client.CodeNotFound},
		{"reconcile an unknown source", "POST", "/v1/sources/nope/reconcile", "", client.CodeNotFound},
		{"trace in an unknown scope", "POST", "/v1/scopes/nope/route/trace", `{"sample":"opened"}`, client.CodeNotFound},
		{"trace body empty", "POST", trace, "", client.CodeInvalidRequest},
		{"trace body not JSON", "POST", trace, `{"sample":`, client.CodeInvalidRequest},
		{"trace body unknown field", "POST", trace, `{"sample":"opened","extra":1}`, client.CodeInvalidRequest},
		{"trace body member in another case", "POST", trace, `{"Sample":"opened"}`, client.CodeInvalidRequest},
		{"trace event member in another case", "POST", trace, `{"event":{"SOURCE":"tester"}}`, client.CodeInvalidRequest},
		{"trace body duplicate key", "POST", trace, `{"sample":"opened","sample":"x"}`, client.CodeInvalidRequest},
		{"trace body nested duplicate", "POST", trace, `{"event":{"source":"a","source":"b"}}`, client.CodeInvalidRequest},
		{"trace body trailing data", "POST", trace, `{"sample":"opened"} {}`, client.CodeInvalidRequest},
		{"trace body invalid UTF-8", "POST", trace, "{\"sample\":\"\xff\"}", client.CodeInvalidRequest},
		{"trace body too deep", "POST", trace, `{"event":{"source":"a","payload":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}`, client.CodeInvalidRequest},
		{"trace body oversized", "POST", trace, `{"sample":"` + strings.Repeat("x", maxRequestBody) + `"}`, client.CodeInvalidRequest},
		{"trace with neither", "POST", trace, `{}`, client.CodeInvalidRequest},
		{"trace with both", "POST", trace, `{"sample":"opened","event":{"source":"tester"}}`, client.CodeInvalidRequest},
		{"trace event without source", "POST", trace, `{"event":{"type":"opened"}}`, client.CodeInvalidRequest},
		{"trace event with a bad source", "POST", trace, `{"event":{"source":"a\u0000b"}}`, client.CodeInvalidRequest},
		{"cancel body unknown field", "POST", "/v1/work/nope/cancel", `{"why":"x"}`, client.CodeInvalidRequest},
		{"changes bad Last-Event-ID", "GET", "/v1/changes?after=x", "", client.CodeInvalidRequest},
		{"config body oversized", "POST", "/v1/config/apply", strings.Repeat(" ", maxConfigBody+1), client.CodeInvalidRequest},
	}
	before := storeDigest(t, b.store)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, "http://x"+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			resp, err := hc.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tc.code.HTTPStatus(), resp.StatusCode)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			var body struct {
				Error struct {
					Code    client.Code `json:"code"`
					Message string      `json:"message"`
				} `json:"error"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			assert.Equal(t, tc.code, body.Error.Code)
			assert.NotEmpty(t, body.Error.Message)
			assert.Less(t, len(body.Error.Message), 400, "a refusal does not echo a large input")
		})
	}
	assert.Equal(t, before, storeDigest(t, b.store), "refusals write nothing")
}

// TestAPIRoutesTable: every route is served with its method, and its
// path answers another method with method_not_allowed, not the mux's text.
func TestAPIRoutesTable(t *testing.T) {
	_, c := newAPITest(t)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", c.Socket())
	}}}
	defer hc.CloseIdleConnections()
	seen := map[string]bool{}
	for _, rt := range apiRoutes {
		key := rt.method + " " + rt.pattern
		assert.False(t, seen[key], "route %s is listed twice", key)
		seen[key] = true
		assert.True(t, strings.HasPrefix(rt.pattern, "/v1/"), "route %s is versioned", key)
		path := strings.NewReplacer("{id}", "x", "{name}", "x").Replace(rt.pattern)
		req, err := http.NewRequestWithContext(t.Context(), "PATCH", "http://x"+path, bytes.NewReader(nil))
		require.NoError(t, err)
		resp, err := hc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, client.CodeMethodNotAllowed.HTTPStatus(), resp.StatusCode, "PATCH %s", path)
	}
}

// TestAPIPageLimitsFitTheStore: the API's page bound is one the store
// reads whole, else a full page would look short and paging would stop.
func TestAPIPageLimitsFitTheStore(t *testing.T) {
	assert.LessOrEqual(t, client.MaxPageLimit, runtime.MaxPageLimit)
	assert.LessOrEqual(t, client.DefaultPageLimit, client.MaxPageLimit)
}
