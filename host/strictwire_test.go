package host_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// wirePeer is an extension's side of the host service's JSON-RPC
// connection, as raw lines: the host serves it as it serves a process's
// stdout, through the transport and Service.Handler.
type wirePeer struct {
	in  io.Writer
	out *bufio.Reader
}

func serveOverWire(t *testing.T, svc *host.Service) *wirePeer {
	t.Helper()
	connR, peerW, err := os.Pipe()
	require.NoError(t, err)
	peerR, connW, err := os.Pipe()
	require.NoError(t, err)
	conn := jsonrpc.NewConn(connR, connW, svc.Handler(), nil)
	t.Cleanup(func() {
		conn.Close()
		peerW.Close()
		peerR.Close()
	})
	return &wirePeer{in: peerW, out: bufio.NewReader(peerR)}
}

// call writes one raw line and reads the host's answer, which must be UTF-8.
func (p *wirePeer) call(t *testing.T, line string) (json.RawMessage, *jsonrpc.Error) {
	t.Helper()
	_, err := io.WriteString(p.in, line+"\n")
	require.NoError(t, err)
	answer, err := p.out.ReadString('\n')
	require.NoError(t, err)
	require.True(t, utf8.ValidString(answer), "the host wrote a line that is not UTF-8: %q", answer)
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(answer), &r))
	return r.Result, r.Error
}

// TestStrictJSONOverTheWire: a kv.commit whose raw line holds an invalid
// byte in a value or a key, or a number beyond float64, is refused as
// invalid params and stores nothing; the same commit written correctly is
// stored (the control that shows the refusal is the strict rule's).
func TestStrictJSONOverTheWire(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	m, err := protocol.ParseManifest(manifestJSON("mine", "good", provideAll("mine"), nil))
	require.NoError(t, err)
	svc := host.NewService(host.ServiceConfig{Manifest: m, Store: st})
	require.NoError(t, svc.Configure(configureFor("mine", "s1"), protocol.ConfigureResult{}))
	p := serveOverWire(t, svc)

	commit := func(key, value string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"kv.commit","params":{"puts":[{"namespace":"mine","key":"` + key + `","value":` + value + `}]}}`
	}
	stored := func(key string) json.RawMessage {
		res, e := p.call(t, `{"jsonrpc":"2.0","id":2,"method":"kv.list","params":{"namespace":"mine"}}`)
		require.Nil(t, e, "kv.list: %v", e)
		var list protocol.KVListResult
		require.NoError(t, json.Unmarshal(res, &list), "%s", res)
		for _, entry := range list.Items {
			if entry.Key == key {
				return entry.Value
			}
		}
		return nil
	}

	for name, line := range map[string]string{
		"invalid byte in a value":  commit("k", `"a`+"\xff"+`b"`),
		"invalid byte in a key":    commit("k"+"\xff", `"v"`),
		"invalid byte in a nested": commit("k", `{"text":["`+"\xc3\x28"+`"]}`),
		"lone surrogate escape":    commit("k", `"\udc00"`),
		"number beyond float64":    commit("k", `{"n":1e400}`),
	} {
		t.Run(name, func(t *testing.T) {
			_, e := p.call(t, line)
			require.NotNil(t, e, "the commit was answered, not refused")
			assert.Equal(t, jsonrpc.CodeInvalidParams, e.Code)
			assert.Nil(t, stored("k"), "nothing was stored")
			assert.Nil(t, stored("k\ufffd"), "no key became U+FFFD")
		})
	}

	_, e := p.call(t, commit("k", `"a✓b"`))
	require.Nil(t, e, "the control commit: %v", e)
	assert.JSONEq(t, `"a✓b"`, string(stored("k")))
}
