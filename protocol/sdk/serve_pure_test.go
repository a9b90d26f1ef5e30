package sdk_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pure handler starts on the reader, but one that blocks neither stalls
// the connection nor misses $/cancel: a route.match waiting for its
// cancellation lets a later route.match be answered meanwhile, and sees
// its cancel. (Served Inline, as before, the later call would wait behind
// it for good and the cancel would never be read: the transport's
// TestEagerBlockingHandlerSeesCancel has that negative control.)
func TestBlockingPureHandlerNeitherStallsNorMissesCancel(t *testing.T) {
	started, seen := make(chan struct{}), make(chan struct{})
	ext := &sdk.Extension{
		Manifest: []byte(`{"name":"pure","version":"1.0.0","command":["pure"],"protocol":[1],` +
			`"provides":{"routes":[{"handler":"pure-slow"}]}}`),
		Routes: map[string]sdk.Route{"pure-slow": {Match: func(ctx context.Context, p protocol.RouteMatchParams) (protocol.RouteMatchResult, error) {
			if string(p.Config) != `{"block":true}` {
				return protocol.RouteMatchResult{Match: true, Kind: "quick"}, nil
			}
			close(started)
			<-ctx.Done()
			close(seen)
			return protocol.RouteMatchResult{}, ctx.Err()
		}}},
		Logf: func(string, ...any) {},
	}
	hostR, extW, err := os.Pipe()
	require.NoError(t, err)
	extR, hostW, err := os.Pipe()
	require.NoError(t, err)
	serveCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := sdk.ServeConn(serveCtx, extR, extW, ext)
		if err != nil {
			t.Log("ServeConn:", err)
		}
		done <- err
	}()
	host := jsonrpc.NewConn(hostR, hostW, sdktest.New().Handler(), &jsonrpc.Options{DecodeError: sdk.DecodeError})
	t.Cleanup(func() { host.Close(); stop(); <-done })
	ctx := t.Context()
	if err := host.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}}, nil); err != nil {
		t.Fatalf("initialize: %v; ServeConn: %v", err, host.Err())
	}

	match := func(config string) protocol.RouteMatchParams {
		return protocol.RouteMatchParams{Handler: "pure-slow", ScopeID: "s", Config: json.RawMessage(config),
			Event: protocol.Event{ID: "e", Schema: "elsewhere.thing.v1", Payload: json.RawMessage(`{}`)}}
	}
	blockCtx, cancel := context.WithCancel(ctx)
	blocked := make(chan error, 1)
	go func() { blocked <- host.Call(blockCtx, "route.match", match(`{"block":true}`), nil) }()
	<-started

	quickCtx, quickDone := context.WithTimeout(ctx, 5*time.Second)
	defer quickDone()
	var res protocol.RouteMatchResult
	require.NoError(t, host.Call(quickCtx, "route.match", match(`{}`), &res), "a request behind a blocking pure handler is served")
	assert.Equal(t, "quick", res.Kind)

	cancel()
	assert.ErrorIs(t, <-blocked, context.Canceled)
	select {
	case <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the blocking pure handler never saw its $/cancel")
	}
}
