package notes_test

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// TestStrayStdout serves notes with a handler that prints to stdout, even
// a line shaped like a response, and checks that the stream stays intact:
// the prints go to stderr, the call gets its own answer, and the next
// call works.
func TestStrayStdout(t *testing.T) {
	ctx := testContext(t)
	host := sdktest.New()
	p := startProcess(t, childCommand(t, "stray"), host)
	stateDir := t.TempDir()
	require.NoError(t, p.Conn.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}, StateDir: stateDir}, nil))
	require.NoError(t, p.Conn.Call(ctx, "configure", configure(2, 2), nil))
	for _, id := range []string{"req-1", "req-2"} {
		var res protocol.OperationCallResult
		require.NoError(t, p.Conn.Call(ctx, "operation.call", protocol.OperationCallParams{Operation: notes.OpAdd, RequestID: id,
			Input: json.RawMessage(`{"title":"loud"}`), Authority: protocol.Authority{ScopeID: "team"}}, &res))
		var out notes.AddOutput
		require.NoError(t, json.Unmarshal(res.Output, &out))
		assert.NotEmpty(t, out.Note)
	}
	require.NoError(t, p.Conn.Call(ctx, "shutdown", protocol.Empty{}, nil))
	require.NoError(t, p.Err(), "the extension exits after shutdown")
	assert.Contains(t, p.Stderr(), "stray line from a handler")
}

// TestBinary runs the standalone binary a third party would build: it
// answers initialize with its manifest, refuses a host with no common
// protocol version, and exits by itself at the end of its input.
func TestBinary(t *testing.T) {
	ctx := testContext(t)
	p := startProcess(t, exec.Command(notesBinary(t)), sdktest.New())
	err := p.Conn.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{99}}, nil)
	assert.ErrorIs(t, err, protocol.ErrUnsupportedProtocolVersion)
	var init protocol.InitializeResult
	require.NoError(t, p.Conn.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}, StateDir: t.TempDir()}, &init))
	assert.Equal(t, protocol.Version(1), init.ProtocolVersion)
	assert.JSONEq(t, string(notes.Extension().Manifest), string(init.Manifest))
	err = p.Conn.Call(ctx, "kv.get", protocol.KVGetParams{Namespace: "notes", Key: "x"}, nil)
	assert.ErrorIs(t, err, protocol.ErrMethodNotFound, "a host method sent to the extension")

	p.Conn.Close()
	require.NoError(t, p.Err(), "end of input ends the process cleanly")
	assert.ErrorIs(t, p.Conn.Call(ctx, "route.match", protocol.RouteMatchParams{}, nil), jsonrpc.ErrTransport)
}
