package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/internal/testbin"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// pythonExtension is the non-Go extension: Python 3, standard library only.
var pythonExtension = filepath.Join("..", "..", "testdata", "extensions", "pynotes")

// startPython starts the Python extension as the host does: its manifest's
// command, resolved in its directory and run there, with the protocol on
// its stdio.
func startPython(t *testing.T, host *sdktest.Host) (*jsonrpc.Conn, <-chan error) {
	t.Helper()
	testbin.NeedPython(t)
	dir, err := filepath.Abs(pythonExtension)
	require.NoError(t, err)
	m, err := protocol.LoadManifest(dir)
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(dir, filepath.FromSlash(m.Command[0])), m.Command[1:]...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	toExtR, toExtW, err := os.Pipe()
	require.NoError(t, err)
	fromExtR, fromExtW, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdin, cmd.Stdout = toExtR, fromExtW
	require.NoError(t, cmd.Start())
	toExtR.Close()
	fromExtW.Close()
	exited, done := make(chan error, 1), make(chan struct{})
	go func() {
		exited <- cmd.Wait()
		close(done)
	}()
	conn := jsonrpc.NewConn(fromExtR, toExtW, host.Handler(), &jsonrpc.Options{DecodeError: sdk.DecodeError})
	t.Cleanup(func() {
		conn.Close()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Error("the Python extension did not exit at the end of its input")
		}
	})
	return conn, exited
}

func TestPythonExtension(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	report := validateManifest(pythonExtension)
	require.True(t, report.Valid, "%+v", report.Problems)
	host := sdktest.New()
	conn, exited := startPython(t, host)

	err := conn.Call(ctx, "route.match", protocol.RouteMatchParams{Handler: "pynotes"}, nil)
	assert.ErrorIs(t, err, protocol.ErrInvalid, "nothing before initialize")
	err = conn.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{2, 99}}, nil)
	assert.ErrorIs(t, err, protocol.ErrUnsupportedProtocolVersion, "no common version is refused")

	var init protocol.InitializeResult
	require.NoError(t, conn.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: protocol.SupportedVersions(),
		Host: protocol.HostInfo{Name: "open-conduit"}, StateDir: t.TempDir()}, &init))
	assert.Equal(t, protocol.Version(1), init.ProtocolVersion)
	file, err := os.ReadFile(filepath.Join(pythonExtension, protocol.ManifestFile))
	require.NoError(t, err)
	assert.JSONEq(t, string(file), string(init.Manifest), "initialize answers the manifest in its directory")
	require.NoError(t, conn.Call(ctx, "configure", protocol.ConfigureParams{Entries: []protocol.ConfigEntry{{ScopeID: "team", ID: "x", Type: "pynotes"}}}, nil))

	note := protocol.Event{ID: "ev-1", Sequence: 1, Source: "pynotes", DeliveryID: "d1", Family: "pynotes.note",
		Schema: "pynotes.note.v1", Payload: json.RawMessage(`{"id":"n1","title":"From Python\nsecond line"}`), Root: "ev-1"}
	var res protocol.RouteMatchResult
	require.NoError(t, conn.Call(ctx, "route.match", protocol.RouteMatchParams{Handler: "pynotes", ScopeID: "team", Event: note}, &res))
	assert.True(t, res.Match)
	assert.Equal(t, "pynotes-review", res.Kind)
	assert.Equal(t, []string{"pynotes:n1"}, res.CorrelationKeys)
	assert.Equal(t, &protocol.Display{Title: "From Python", Ref: "n1"}, res.Display)
	newer := note
	newer.Schema = "pynotes.note.v2"
	res = protocol.RouteMatchResult{}
	require.NoError(t, conn.Call(ctx, "route.match", protocol.RouteMatchParams{Handler: "pynotes", Event: newer}, &res))
	assert.False(t, res.Match, res.Reason)

	call := protocol.OperationCallParams{Operation: "pynotes.add", RequestID: "req-1",
		Input: json.RawMessage(`{"title":"once"}`), Authority: protocol.Authority{ScopeID: "team"}}
	var first, again protocol.OperationCallResult
	require.NoError(t, conn.Call(ctx, "operation.call", call, &first))
	require.NoError(t, conn.Call(ctx, "operation.call", call, &again))
	assert.JSONEq(t, `{"note":"once"}`, string(first.Output))
	assert.JSONEq(t, string(first.Output), string(again.Output), "a retry answers what the first call recorded")
	commits := 0
	for _, m := range host.Calls() {
		if m == "kv.commit" {
			commits++
		}
	}
	assert.Equal(t, 1, commits, "the effect is recorded once per request ID")
	assert.JSONEq(t, `{"note":"once"}`, string(host.KV("pynotes", "request/req-1")))

	call.Input = json.RawMessage(`{"title":""}`)
	assert.ErrorIs(t, conn.Call(ctx, "operation.call", call, nil), protocol.ErrInvalid, "an authored error crosses with its code")
	call.Operation = "pynotes.other"
	assert.ErrorIs(t, conn.Call(ctx, "operation.call", call, nil), protocol.ErrUndeclared)
	assert.ErrorIs(t, conn.Call(ctx, "no.such.method", protocol.Empty{}, nil), protocol.ErrMethodNotFound)

	require.NoError(t, conn.Call(ctx, "shutdown", protocol.Empty{}, nil))
	select {
	case err := <-exited:
		assert.NoError(t, err, "the extension exits after shutdown")
	case <-ctx.Done():
		t.Fatal("the extension did not exit after shutdown")
	}
	assert.True(t, slices.Contains(host.Calls(), "kv.get"))
}

// TestPythonExtensionExitsAtEOF: a host that goes away leaves no orphan.
func TestPythonExtensionExitsAtEOF(t *testing.T) {
	conn, exited := startPython(t, sdktest.New())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, conn.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}}, nil))
	conn.Close()
	select {
	case err := <-exited:
		assert.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the extension did not exit at the end of its input")
	}
}
