package sdk_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// TestShutdownServesRequestsReadBeforeIt: requests read before shutdown
// whose handlers start only after shutdown's has started (the transport
// starts each handler on its own goroutine, in any order) are still in
// flight at shutdown: each is served and answered before the extension
// exits, none refused shutting_down, none dropped by the exit. This is the
// runner's lifecycle/shutdown flake: an executor.wait sent just before
// shutdown was never answered (end of stream).
func TestShutdownServesRequestsReadBeforeIt(t *testing.T) {
	const before = 8
	ctx := testContext(t)
	d, host := &demo{}, sdktest.New()
	ext := d.extension()
	ext.Tasks["demo-sweep"] = func(ctx context.Context, host *sdk.Host, p protocol.TaskRunParams) (protocol.TaskRunResult, error) {
		return protocol.TaskRunResult{Detail: "finished"}, nil
	}
	read := make(chan struct{}, before)
	shutdownStarted := make(chan struct{})
	var startOnce sync.Once
	t.Cleanup(sdk.SetBeforeServe(func(method string) {
		switch method {
		case "task.run":
			read <- struct{}{}
			<-shutdownStarted // start only once shutdown's handler has
		case "shutdown":
			startOnce.Do(func() { close(shutdownStarted) })
		}
	}))
	conn, done, err := sdktest.Pipe(context.Background(), ext, host)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.Call(ctx, "initialize", initParams, nil))

	results := make(chan error, before)
	for range before {
		go func() {
			var res protocol.TaskRunResult
			err := conn.Call(ctx, "task.run", protocol.TaskRunParams{Task: "demo-sweep"}, &res)
			if err == nil && res.Detail != "finished" {
				err = assert.AnError
			}
			results <- err
		}()
	}
	for range before {
		<-read // every task.run is on the stream before shutdown
	}
	require.NoError(t, conn.Call(ctx, "shutdown", protocol.Empty{}, nil))
	for range before {
		assert.NoError(t, <-results, "a request read before shutdown must be served and answered")
	}
	require.NoError(t, <-done)
}

// TestShutdownExitsOnlyOnceEveryRequestIsAnswered: after shutdown the
// extension exits once each request it took has its answer on the wire,
// not once as many answers as requests have been written. Here a request
// refused overloaded by the transport (an answer no handler gave) is on
// the wire while a task.run's answer is still to be written; the exit
// must wait for the task.run's.
func TestShutdownExitsOnlyOnceEveryRequestIsAnswered(t *testing.T) {
	t.Cleanup(sdk.SetMaxInflight(2))
	ext := (&demo{}).extension()
	taskStarted, release := make(chan struct{}), make(chan struct{})
	ext.Tasks["demo-sweep"] = func(ctx context.Context, host *sdk.Host, p protocol.TaskRunParams) (protocol.TaskRunResult, error) {
		close(taskStarted)
		<-release
		return protocol.TaskRunResult{Detail: "finished"}, nil
	}
	shutdownBegan := make(chan struct{})
	ext.Shutdown = func(context.Context, *sdk.Host) error { close(shutdownBegan); return nil }
	shutdownAnswered := make(chan struct{})
	t.Cleanup(sdk.SetAfterServe(func(method string) {
		if method == "task.run" {
			<-shutdownAnswered // the task's answer is written after shutdown's
		}
	}))

	extIn, hostOut := io.Pipe()
	hostIn, extOut := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- sdk.ServeConn(context.Background(), extIn, extOut, ext) }()
	t.Cleanup(func() { hostOut.Close(); hostIn.Close() })
	lines := bufio.NewScanner(hostIn)
	send := func(line string) {
		_, err := io.WriteString(hostOut, line+"\n")
		require.NoError(t, err)
	}
	next := func() string {
		require.True(t, lines.Scan(), "the extension's next line: %v", lines.Err())
		return lines.Text()
	}

	init, err := json.Marshal(initParams)
	require.NoError(t, err)
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + string(init) + `}`)
	require.Contains(t, next(), `"id":1,"result"`)
	send(`{"jsonrpc":"2.0","id":2,"method":"task.run","params":{"task":"demo-sweep"}}`)
	<-taskStarted
	send(`{"jsonrpc":"2.0","id":3,"method":"shutdown","params":{}}`)
	<-shutdownBegan
	send(`{"jsonrpc":"2.0","id":4,"method":"task.run","params":{"task":"demo-sweep"}}`)
	require.Contains(t, next(), `"id":4,"error"`, "over the bound of 2 the transport answers overloaded itself")
	close(release)
	require.Contains(t, next(), `"id":3,"result"`)
	close(shutdownAnswered)
	last, ok := "", lines.Scan()
	if ok {
		last = lines.Text()
	}
	assert.True(t, ok, "the task.run taken before shutdown was never answered: %v", lines.Err())
	assert.Contains(t, last, `"id":2,"result":{"detail":"finished"}`)
	require.NoError(t, <-done)
}
