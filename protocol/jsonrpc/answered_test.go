package jsonrpc_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// TestAnsweredReportsTheHandlersAnswersOnly: Options.Answered hears of
// each request the Handler served, once its answer is out, and of nothing
// the Conn answers itself (overloaded).
func TestAnsweredReportsTheHandlersAnswersOnly(t *testing.T) {
	release := make(chan struct{})
	answered := make(chan string, 8)
	p := newRawPeer(t, jsonrpc.Methods{
		"hold": func(context.Context, *jsonrpc.Request) (any, error) { <-release; return "held", nil },
		"m":    func(context.Context, *jsonrpc.Request) (any, error) { return "ok", nil },
	}, &jsonrpc.Options{
		MaxInflight: 1,
		Answered:    func(req *jsonrpc.Request) { answered <- string(req.ID) },
	})
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"hold"}`)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"m"}`)
	require.Contains(t, p.next(t), `"id":2,"error"`, "over the bound the Conn answers overloaded itself")
	close(release)
	require.Contains(t, p.next(t), `"id":1,"result":"held"`)
	p.send(t, `{"jsonrpc":"2.0","id":3,"method":"m"}`)
	require.Contains(t, p.next(t), `"id":3,"result":"ok"`)
	assert.Equal(t, "1", <-answered)
	assert.Equal(t, "3", <-answered)
	select {
	case id := <-answered:
		t.Fatalf("Answered heard of %s, which no handler answered", id)
	default:
	}
}
