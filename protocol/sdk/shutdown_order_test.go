package sdk_test

import (
	"context"
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
