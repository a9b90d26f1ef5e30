package jsonrpc_test

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func allEager(string) bool { return true }

// The transport suite over a peer that starts every request on its reader
// (Options.Eager): cancellation, nested callbacks, the 32×50 concurrent
// echoes, crashes and the rest keep their semantics.
func TestTransportPipeEager(t *testing.T) {
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
				DecodeError: decodeProtocolError, ReuseParams: true, Eager: allEager})
			stop := func() error {
				<-peer.Done()
				return nil
			}
			return conformance.TransportEndpoint{Reader: hostR, Writer: hostW, Stop: stop}, nil
		},
	})
}

func TestTransportSubprocessEager(t *testing.T) {
	conformance.RunTransport(t, subprocessDriver("peer-eager"))
}

// A quick Eager handler is served on the reader and never hands the
// reading on; one that calls back hands it on once, at its call, and gets
// its answer. The same handler under Inline cannot get its answer (the
// negative control: what Eager's handoff is for).
func TestEagerHandsOnAtACallback(t *testing.T) {
	var mu sync.Mutex
	var where []bool
	var seqs []uint64
	peer := jsonrpc.Methods{
		"quick": func(_ context.Context, req *jsonrpc.Request) (any, error) {
			mu.Lock()
			where, seqs = append(where, onReader()), append(seqs, req.Seq)
			mu.Unlock()
			return req.Params, nil
		},
		"nested": func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			var out []string
			err := jsonrpc.ConnFromContext(ctx).Call(ctx, "host.echo", []string{"nested"}, &out)
			return out, err
		},
	}
	host := jsonrpc.Methods{"host.echo": func(_ context.Context, req *jsonrpc.Request) (any, error) { return req.Params, nil }}
	h, p := pipePair(t, host, peer, nil, &jsonrpc.Options{Eager: allEager, EagerDeadline: time.Hour})
	for i := range 50 {
		var out []int
		require.NoError(t, h.Call(t.Context(), "quick", []int{i}, &out))
		assert.Equal(t, []int{i}, out)
	}
	assert.NotContains(t, where, false, "a quick Eager handler ran off the reader")
	assert.True(t, slices.IsSorted(seqs))
	assert.Zero(t, jsonrpc.Handoffs(p), "a quick Eager handler handed the reading on")

	var out []string
	require.NoError(t, h.Call(t.Context(), "nested", nil, &out), "an Eager handler's callback is answered")
	assert.Equal(t, []string{"nested"}, out)
	assert.EqualValues(t, 1, jsonrpc.Handoffs(p), "a calling-back handler hands the reading on once")
	require.NoError(t, h.Call(t.Context(), "quick", []int{7}, nil), "the new reader serves on")

	// Negative control: served Inline, the callback's answer is never read.
	h2, _ := pipePair(t, host, peer, nil, &jsonrpc.Options{Inline: allEager})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, h2.Call(ctx, "nested", nil, nil), context.DeadlineExceeded, "an Inline handler's callback got an answer")
}

// An Eager handler that blocks without calling back hands the reading on
// at its deadline, so $/cancel reaches it and the stream goes on; under
// Inline the same handler never sees the cancel (the negative control).
func TestEagerBlockingHandlerSeesCancel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     *jsonrpc.Options
		wantSeen bool
	}{
		{"eager", &jsonrpc.Options{Eager: allEager, EagerDeadline: time.Millisecond}, true},
		{"inline", &jsonrpc.Options{Inline: allEager}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan struct{})
			started := make(chan struct{})
			peer := jsonrpc.Methods{
				"block": func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
					close(started)
					select {
					case <-ctx.Done():
						close(seen)
					case <-time.After(time.Second):
					}
					return nil, ctx.Err()
				},
				"quick": func(_ context.Context, req *jsonrpc.Request) (any, error) { return req.Params, nil },
			}
			h, _ := pipePair(t, nil, peer, nil, tc.opts)
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() { errc <- h.Call(ctx, "block", nil, nil) }()
			<-started
			// The quick call is read after block's request: answered
			// once the reading has passed on.
			qctx, qcancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer qcancel()
			qerr := h.Call(qctx, "quick", []int{1}, nil)
			cancel()
			assert.ErrorIs(t, <-errc, context.Canceled)
			got := false
			select {
			case <-seen:
				got = true
			case <-time.After(300 * time.Millisecond):
			}
			assert.Equal(t, tc.wantSeen, got, "the blocking handler saw $/cancel")
			if tc.wantSeen {
				assert.NoError(t, qerr, "a request behind a blocking Eager handler is served")
			}
		})
	}
}

// Eager requests keep the bound: with MaxInflight Eager handlers blocked
// (each handed on at its deadline) a request is answered overloaded, and
// their nested callbacks are answered while the bound is full.
func TestEagerKeepsTheBound(t *testing.T) {
	assertBoundKeepsCallbacks(t, "quick", func(bound int) *jsonrpc.Options {
		return &jsonrpc.Options{MaxInflight: bound, Eager: allEager, EagerDeadline: time.Millisecond}
	})
}
