package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/runtime"
)

// putKV writes entries of namespace ns into the store, as a package's
// commit would.
func putKV(t *testing.T, b *apiTestBackend, ns string, kv map[string]string) {
	t.Helper()
	var batch runtime.KVBatch
	for k, v := range kv {
		batch.Puts = append(batch.Puts, runtime.KVPut{Namespace: ns, Key: k, Value: []byte(v)})
	}
	require.NoError(t, b.store.Transact(context.Background(), func(tx runtime.Tx) error { return tx.KVCommit(batch) }))
}

// TestAPIKV: the KV route pages one namespace of a package in key order,
// with prefix and cursor, and reads no other namespace.
func TestAPIKV(t *testing.T) {
	b, c := newAPITest(t)
	ctx := t.Context()
	putKV(t, b, "tester", map[string]string{"a/1": `{"n":1}`, "a/2": `{"n":2}`, "a/3": `[3]`, "b/1": `"b"`})
	putKV(t, b, "tester.index", map[string]string{"count": `4`})
	putKV(t, b, "testerx", map[string]string{"a/9": `"not the tester's"`})
	putKV(t, b, generationNamespace, map[string]string{"a/0": `"reserved"`})

	page, err := c.KV(ctx, client.KVQuery{Package: "tester", Prefix: "a/", Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, "tester", page.Namespace, "the namespace defaults to the package's name")
	require.Len(t, page.Entries, 2)
	assert.Equal(t, "a/1", page.Entries[0].Key)
	assert.JSONEq(t, `{"n":1}`, string(page.Entries[0].Value))
	assert.Equal(t, runtime.KVVersion([]byte(`{"n":1}`)), page.Entries[0].Version)
	assert.Equal(t, "a/2", page.Next, "a full page names its cursor")

	page, err = c.KV(ctx, client.KVQuery{Package: "tester", Prefix: "a/", After: page.Next, Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Entries, 1)
	assert.Equal(t, "a/3", page.Entries[0].Key)
	assert.Empty(t, page.Next, "a short page is the end")

	all, err := c.KV(ctx, client.KVQuery{Package: "tester"})
	require.NoError(t, err)
	var keys []string
	for _, e := range all.Entries {
		keys = append(keys, e.Key)
	}
	assert.Equal(t, []string{"a/1", "a/2", "a/3", "b/1"}, keys, "only the tester namespace, in key order")

	sub, err := c.KV(ctx, client.KVQuery{Package: "tester", Namespace: "tester.index"})
	require.NoError(t, err)
	require.Len(t, sub.Entries, 1)
	assert.Equal(t, "count", sub.Entries[0].Key)

	empty, err := c.KV(ctx, client.KVQuery{Package: "tester", Namespace: "tester.none"})
	require.NoError(t, err)
	assert.NotNil(t, empty.Entries, "an empty page lists no entries, not null")
	assert.Empty(t, empty.Entries)
}

// TestAPIKVRefusals: a KV read names a known package and one of its own
// namespaces, or is refused with its stable code.
func TestAPIKVRefusals(t *testing.T) {
	b, c := newAPITest(t)
	putKV(t, b, generationNamespace, map[string]string{"x": `1`})
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", c.Socket())
	}}}
	defer hc.CloseIdleConnections()
	cases := []struct {
		name, query string
		code        client.Code
	}{
		{"no package", "", client.CodeInvalidRequest},
		{"package not a name", "package=Tester", client.CodeInvalidRequest},
		{"unknown package", "package=nobody", client.CodeNotFound},
		{"the daemon's namespace", "package=tester&namespace=" + generationNamespace, client.CodeInvalidRequest},
		{"a namespace sharing the name's prefix", "package=tester&namespace=testerx", client.CodeInvalidRequest},
		{"empty namespace", "package=tester&namespace=", client.CodeInvalidRequest},
		{"unprintable namespace", "package=tester&namespace=tester.%01", client.CodeInvalidRequest},
		{"limit zero", "package=tester&limit=0", client.CodeInvalidRequest},
		{"limit over the bound", fmt.Sprintf("package=tester&limit=%d", client.MaxPageLimit+1), client.CodeInvalidRequest},
		{"unknown parameter", "package=tester&scope=a", client.CodeInvalidRequest},
		{"parameter twice", "package=tester&package=tester", client.CodeInvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), "GET", "http://x/v1/kv?"+tc.query, nil)
			require.NoError(t, err)
			resp, err := hc.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tc.code.HTTPStatus(), resp.StatusCode)
			var body struct {
				Error struct {
					Code    client.Code `json:"code"`
					Message string      `json:"message"`
				} `json:"error"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			assert.Equal(t, tc.code, body.Error.Code)
			assert.NotEmpty(t, body.Error.Message)
		})
	}
	// The client's sentinels hold for the same refusals.
	_, err := c.KV(t.Context(), client.KVQuery{Package: "nobody"})
	assert.ErrorIs(t, err, client.ErrNotFound)
	_, err = c.KV(t.Context(), client.KVQuery{Package: "tester", Namespace: generationNamespace})
	assert.ErrorIs(t, err, client.ErrInvalidRequest)
}
