package jsonrpc_test

import (
	"context"
	"encoding/json"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// peerInline are the transport peer's methods that answer from their
// params or memory, which the inline peers serve on the reader.
var peerInline = []string{"initialize", "test.echo", "test.fail", "test.release", "test.stdout", "artifact.write", "artifact.commit"}

func inlinePeerMethod(method string, _ json.RawMessage) bool {
	return slices.Contains(peerInline, method)
}

// The transport suite over a peer that serves its pure methods inline:
// cancellation, nested callbacks and the rest keep their semantics.
func TestTransportPipeInline(t *testing.T) {
	conformance.RunTransport(t, conformance.TransportDriver{
		Start: func(context.Context) (conformance.TransportEndpoint, error) {
			hostR, peerW, err := os.Pipe()
			if err != nil {
				return conformance.TransportEndpoint{}, err
			}
			peerR, hostW, err := os.Pipe()
			if err != nil {
				return conformance.TransportEndpoint{}, err
			}
			peer := jsonrpc.NewConn(peerR, peerW, (&conformance.TransportPeer{}).Handler(), &jsonrpc.Options{
				DecodeError: decodeProtocolError, ReuseParams: true, Inline: inlinePeerMethod})
			stop := func() error {
				<-peer.Done()
				return nil
			}
			return conformance.TransportEndpoint{Reader: hostR, Writer: hostW, Stop: stop}, nil
		},
	})
}

func TestTransportSubprocessInline(t *testing.T) {
	conformance.RunTransport(t, subprocessDriver("peer-inline"))
}

// onReader reports whether the calling handler runs on the Conn's reader
// goroutine rather than one of its own.
func onReader() bool {
	buf := make([]byte, 64<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), "(*Conn).readLoop")
}

// An Inline method is served on the reader, every other in a goroutine of
// its own (the second half is the check's negative control), each in
// stream order with its Seq.
func TestInlineServedOnTheReader(t *testing.T) {
	var mu sync.Mutex
	where := map[string][]bool{}
	var seqs []uint64
	record := func(_ context.Context, req *jsonrpc.Request) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		where[req.Method] = append(where[req.Method], onReader())
		if req.Method == "pure" {
			seqs = append(seqs, req.Seq)
		}
		return req.Params, nil
	}
	peer := jsonrpc.Methods{"pure": record, "other": record}
	h, _ := pipePair(t, nil, peer, nil, &jsonrpc.Options{Inline: func(m string, _ json.RawMessage) bool { return m == "pure" }})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				var out []int
				assert.NoError(t, h.Call(t.Context(), "pure", []int{g, i}, &out))
				assert.Equal(t, []int{g, i}, out)
				assert.NoError(t, h.Call(t.Context(), "other", []int{g, i}, nil))
			}
		})
	}
	wg.Wait()
	require.Len(t, where["pure"], 160)
	require.Len(t, where["other"], 160)
	assert.NotContains(t, where["pure"], false, "an Inline method ran off the reader")
	assert.NotContains(t, where["other"], true, "a method not named by Inline ran on the reader")
	assert.True(t, slices.IsSorted(seqs), "inline requests are served in stream order")
}

// Inline sees each request's params as well as its method, so a request
// can be served on the reader for what its params say: here the same
// method is Inline for params that say so and not for the rest (the
// negative control), and the predicate saw exactly the params sent.
func TestInlineDecidesFromParams(t *testing.T) {
	var mu sync.Mutex
	where := map[string][]bool{}
	var seen []string
	record := func(_ context.Context, req *jsonrpc.Request) (any, error) {
		var p struct{ Pure bool }
		assert.NoError(t, req.DecodeParams(&p))
		mu.Lock()
		defer mu.Unlock()
		where[strconv.FormatBool(p.Pure)] = append(where[strconv.FormatBool(p.Pure)], onReader())
		return req.Params, nil
	}
	inline := func(method string, params json.RawMessage) bool {
		mu.Lock()
		seen = append(seen, string(params))
		mu.Unlock()
		return method == "call" && string(params) == `{"pure":true}`
	}
	h, _ := pipePair(t, nil, jsonrpc.Methods{"call": record}, nil, &jsonrpc.Options{Inline: inline})
	for range 20 {
		for _, pure := range []bool{true, false} {
			require.NoError(t, h.Call(t.Context(), "call", map[string]bool{"pure": pure}, nil))
		}
	}
	require.NoError(t, h.Call(t.Context(), "call", nil, nil))
	require.Len(t, where["true"], 20)
	require.Len(t, where["false"], 21)
	assert.NotContains(t, where["true"], false, "a request Inline named ran off the reader")
	assert.NotContains(t, where["false"], true, "negative control: a request Inline did not name ran on the reader")
	require.Len(t, seen, 41)
	assert.Equal(t, `{"pure":true}`, seen[0])
	assert.Equal(t, `{"pure":false}`, seen[1])
	assert.Empty(t, seen[40], "no params: nil")
}

// Inline requests keep the bound: with MaxInflight goroutine handlers in
// flight an inline request is answered overloaded, and the nested callback
// of a handler in flight still gets its answer.
func TestInlineKeepsTheBound(t *testing.T) {
	assertBoundKeepsCallbacks(t, "pure", func(bound int) *jsonrpc.Options {
		return &jsonrpc.Options{MaxInflight: bound, Inline: func(m string, _ json.RawMessage) bool { return m == "pure" }}
	})
}

// assertBoundKeepsCallbacks: with bound "block" handlers in flight on a
// peer served with opts(bound), a request for quick is answered
// overloaded, the blocked handlers' nested callbacks are still answered,
// and below the bound quick is served again.
func assertBoundKeepsCallbacks(t *testing.T, quick string, opts func(bound int) *jsonrpc.Options) {
	t.Helper()
	const bound = 4
	started := make(chan struct{}, bound)
	release := make(chan struct{})
	peer := jsonrpc.Methods{
		"block": func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
			started <- struct{}{}
			<-release
			var out []string
			err := jsonrpc.ConnFromContext(ctx).Call(ctx, "host.echo", []string{"nested"}, &out)
			return out, err
		},
		quick: func(_ context.Context, req *jsonrpc.Request) (any, error) { return req.Params, nil },
	}
	host := jsonrpc.Methods{"host.echo": func(_ context.Context, req *jsonrpc.Request) (any, error) { return req.Params, nil }}
	h, _ := pipePair(t, host, peer, nil, opts(bound))
	results := make(chan error, bound)
	for range bound {
		go func() {
			var out []string
			err := h.Call(t.Context(), "block", nil, &out)
			if err == nil && !slices.Equal(out, []string{"nested"}) {
				err = assert.AnError
			}
			results <- err
		}()
	}
	for range bound {
		<-started
	}
	err := h.Call(t.Context(), quick, []int{1}, nil)
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, err, &rpcErr, "a request over the bound")
	assert.JSONEq(t, `{"code":"overloaded"}`, string(rpcErr.Data))
	close(release)
	for range bound {
		assert.NoError(t, <-results, "nested callbacks answered while the bound is full")
	}
	var out []int
	require.NoError(t, h.Call(t.Context(), quick, []int{2}, &out), "below the bound again")
	assert.Equal(t, []int{2}, out)
}

// An inline handler's errors and panics cross as any handler's do.
func TestInlineErrorsAndPanics(t *testing.T) {
	peer := jsonrpc.Methods{
		"fail": func(context.Context, *jsonrpc.Request) (any, error) {
			return nil, protocol.NewError(protocol.CodeConflict, "stale")
		},
		"panic": func(context.Context, *jsonrpc.Request) (any, error) { panic("boom") },
	}
	h, _ := pipePair(t, nil, peer, &jsonrpc.Options{DecodeError: decodeProtocolError}, &jsonrpc.Options{Inline: func(string, json.RawMessage) bool { return true }})
	err := h.Call(t.Context(), "fail", nil, nil)
	assert.ErrorIs(t, err, protocol.ErrConflict)
	err = h.Call(t.Context(), "panic", nil, nil)
	assert.ErrorIs(t, err, protocol.ErrInternal)
	assert.NotContains(t, err.Error(), "boom")
	err = h.Call(t.Context(), "missing", nil, nil)
	assert.ErrorIs(t, err, protocol.ErrMethodNotFound)
}

// decodeProtocolError maps wire errors onto the protocol's sentinels.
func decodeProtocolError(code int, message string, data json.RawMessage) error {
	return protocol.DecodeWireError(code, message, data)
}
