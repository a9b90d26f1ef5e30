//go:build linux

package sdk_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	// demo-stdio is the demo whose task reports how its stdio is served,
	// after collecting garbage (so a File the SDK dropped would have been
	// finalized and closed its descriptor).
	children["demo-stdio"] = func() {
		ext := (&demo{}).extension()
		ext.Logf = nil
		ext.Tasks["demo-sweep"] = func(context.Context, *sdk.Host, protocol.TaskRunParams) (protocol.TaskRunResult, error) {
			runtime.GC()
			runtime.GC()
			return protocol.TaskRunResult{Detail: fmt.Sprintf("stdin nonblocking=%t stdout nonblocking=%t", nonblocking(0), nonblocking(1))}, nil
		}
		if err := sdk.Serve(ext); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func nonblocking(fd uintptr) bool {
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	return errno == 0 && flags&syscall.O_NONBLOCK != 0
}

// Serve reads stdin in blocking system calls (one read a message, served
// on the reader) and writes a pipe stdout through the runtime's poller
// (non-blocking), and the stream survives garbage collection: the File
// Serve replaced is kept, so its finalizer never closes the descriptor
// under the protocol.
func TestServeStdinBlockingStdoutOnThePoller(t *testing.T) {
	ctx := testContext(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), sdkChildEnv+"=demo-stdio")
	p, err := sdktest.Start(cmd, sdktest.New())
	require.NoError(t, err)
	conn := p.Conn
	require.NoError(t, conn.Call(ctx, "initialize", initParams, nil))
	require.NoError(t, conn.Call(ctx, "configure", protocol.ConfigureParams{KV: protocol.KVLayout{Stored: 2, Declared: 2}}, nil))
	for i := range 20 {
		var res protocol.TaskRunResult
		require.NoError(t, conn.Call(ctx, "task.run", protocol.TaskRunParams{Task: "demo-sweep"}, &res), "call %d after collections", i)
		assert.Equal(t, "stdin nonblocking=false stdout nonblocking=true", res.Detail)
	}
	conn.Close()
	require.NoError(t, p.Err(), "stderr:\n%s", p.Stderr())
}
