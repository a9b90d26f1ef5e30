package jsonrpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func allEager(string) bool { return true }

func allInline(string, json.RawMessage) bool { return true }

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
// reading on; one that calls back with its own context reads its answers
// itself, on the reader, and hands nothing on either; one that calls with
// a context of its own hands the reading on once, at its call, and gets
// its answer. The same handler under Inline cannot get its answer (the
// negative control: what Eager's handoff is for).
func TestEagerHandsOnAtACallback(t *testing.T) {
	var mu sync.Mutex
	var where []bool
	var seqs []uint64
	nested := func(ctx, callCtx context.Context) (any, error) {
		var out []string
		for i := range 3 {
			if err := jsonrpc.ConnFromContext(ctx).Call(callCtx, "host.echo", []string{"nested", strconv.Itoa(i)}, &out); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	peer := jsonrpc.Methods{
		"quick": func(_ context.Context, req *jsonrpc.Request) (any, error) {
			mu.Lock()
			where, seqs = append(where, onReader()), append(seqs, req.Seq)
			mu.Unlock()
			return req.Params, nil
		},
		"nested": func(ctx context.Context, _ *jsonrpc.Request) (any, error) { return nested(ctx, ctx) },
		"nested-derived": func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
			callCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			return nested(ctx, callCtx)
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
	require.NoError(t, h.Call(t.Context(), "nested", nil, &out), "an Eager handler's callbacks are answered")
	assert.Equal(t, []string{"nested", "2"}, out)
	assert.Zero(t, jsonrpc.Handoffs(p), "a handler calling back with its own context handed the reading on")

	require.NoError(t, h.Call(t.Context(), "nested-derived", nil, &out), "an Eager handler's callbacks are answered")
	assert.Equal(t, []string{"nested", "2"}, out)
	assert.EqualValues(t, 1, jsonrpc.Handoffs(p), "a handler calling back with a derived context hands the reading on once")
	require.NoError(t, h.Call(t.Context(), "quick", []int{7}, nil), "the new reader serves on")

	// Negative control: served Inline, the callback's answer is never read.
	h2, _ := pipePair(t, host, peer, nil, &jsonrpc.Options{Inline: allInline})
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
		{"inline", &jsonrpc.Options{Inline: allInline}, false},
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

// While an Eager handler's call reads its own answer, every line before
// the answer is served as the reader serves it: here a request from the
// host, which the host waits for before it answers. An Eager request
// read meanwhile gets a goroutine of its own rather than starting on the
// reading call's goroutine (where it would hold up that call's answer).
func TestEagerCallServesWhatComesBeforeItsAnswer(t *testing.T) {
	quickOnReader := make(chan bool, 1)
	peer := jsonrpc.Methods{
		"quick": func(_ context.Context, req *jsonrpc.Request) (any, error) {
			quickOnReader <- onReader()
			return req.Params, nil
		},
		"nested": func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
			var out []string
			err := jsonrpc.ConnFromContext(ctx).Call(ctx, "host.ask-first", []string{"nested"}, &out)
			return out, err
		},
	}
	host := jsonrpc.Methods{"host.ask-first": func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		var out []int
		if err := jsonrpc.ConnFromContext(ctx).Call(ctx, "quick", []int{1}, &out); err != nil {
			return nil, err
		}
		return req.Params, nil
	}}
	h, p := pipePair(t, host, peer, nil, &jsonrpc.Options{Eager: allEager, EagerDeadline: time.Hour})
	var out []string
	require.NoError(t, h.Call(t.Context(), "nested", nil, &out))
	assert.Equal(t, []string{"nested"}, out)
	assert.False(t, <-quickOnReader, "an Eager request read by a call started on that call's goroutine")
	assert.Zero(t, jsonrpc.Handoffs(p))
}

// untilCancelled is a method whose handler blocks until its request's
// context ends: started is closed as it starts, cancelled once it ended.
type untilCancelled struct{ started, cancelled chan struct{} }

func newUntilCancelled() *untilCancelled {
	return &untilCancelled{started: make(chan struct{}), cancelled: make(chan struct{})}
}

func (u *untilCancelled) handle(ctx context.Context, _ *jsonrpc.Request) (any, error) {
	close(u.started)
	<-ctx.Done()
	close(u.cancelled)
	return nil, ctx.Err()
}

// A $/cancel for the request of a handler whose call reads its own answer
// is read by that call, which returns context.Canceled and cancels its
// own request in turn, as a call waiting for the reader does.
func TestEagerCallReadingItsAnswerSeesCancel(t *testing.T) {
	hang := newUntilCancelled()
	callErr := make(chan error, 1)
	peer := jsonrpc.Methods{
		"nested-hang": func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
			err := jsonrpc.ConnFromContext(ctx).Call(ctx, "host.hang", nil, nil)
			callErr <- err
			return nil, err
		},
		"quick": func(_ context.Context, req *jsonrpc.Request) (any, error) { return req.Params, nil },
	}
	host := jsonrpc.Methods{"host.hang": hang.handle}
	h, _ := pipePair(t, host, peer, nil, &jsonrpc.Options{Eager: allEager, EagerDeadline: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- h.Call(ctx, "nested-hang", nil, nil) }()
	<-hang.started
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	select {
	case err := <-callErr:
		assert.ErrorIs(t, err, context.Canceled, "the handler's call")
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's call, reading its own answer, missed the $/cancel of its request")
	}
	select {
	case <-hang.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's call did not cancel its own request")
	}
	require.NoError(t, h.Call(t.Context(), "quick", []int{1}, nil), "the peer reads on")
}

// signalWriter closes seen once it has written a line that holds marker.
type signalWriter struct {
	w      io.Writer
	marker []byte
	seen   chan struct{}
	once   sync.Once
}

func (s *signalWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if bytes.Contains(p, s.marker) {
		s.once.Do(func() { close(s.seen) })
	}
	return n, err
}

// A call that read its own answer passes the reading on when another
// call waits for one: here a goroutine of the handler's that called once
// the handler's call held the reading, and whose answer the host writes
// after the handler's. The handler then waits for it on a channel, so
// only a reader can end the wait (the deadline is an hour off).
func TestEagerCallReadingItsAnswerPassesOnToAWaitingCall(t *testing.T) {
	echoStarted, slowStarted := make(chan struct{}), make(chan struct{})
	hostR, peerW, err := os.Pipe()
	require.NoError(t, err)
	peerR, hostW, err := os.Pipe()
	require.NoError(t, err)
	echoWritten := &signalWriter{w: hostW, marker: []byte(`"own-answer"`), seen: make(chan struct{})}
	h := jsonrpc.NewConn(hostR, echoWritten, jsonrpc.Methods{
		"host.echo": func(_ context.Context, req *jsonrpc.Request) (any, error) {
			close(echoStarted)
			<-slowStarted
			return req.Params, nil
		},
		"host.slow": func(context.Context, *jsonrpc.Request) (any, error) {
			close(slowStarted)
			<-echoWritten.seen
			return "slow", nil
		},
	}, nil)
	p := jsonrpc.NewConn(peerR, peerW, jsonrpc.Methods{"two-calls": func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
		conn := jsonrpc.ConnFromContext(ctx)
		slow := make(chan error, 1)
		go func() {
			<-echoStarted // the handler's call holds the reading
			slow <- conn.Call(context.Background(), "host.slow", nil, nil)
		}()
		var out []string
		if err := conn.Call(ctx, "host.echo", []string{"own-answer"}, &out); err != nil {
			return nil, err
		}
		return out, <-slow
	}}, &jsonrpc.Options{Eager: allEager, EagerDeadline: time.Hour})
	t.Cleanup(func() {
		_ = h.Close()
		_ = p.Close()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var out []string
	require.NoError(t, h.Call(ctx, "two-calls", nil, &out), "the other call's answer was read")
	assert.Equal(t, []string{"own-answer"}, out)
}

// A handler may return while a goroutine of its own is in a call with its
// context, reading that call's answer: the reading goes on. The call reads
// the next line (a request, served), sees its context ended with the
// handler and returns, cancelling its request, and a new reader reads on.
func TestEagerHandlerReturnsWhileItsCallReads(t *testing.T) {
	wait := newUntilCancelled()
	callErr := make(chan error, 1)
	peer := jsonrpc.Methods{
		"spawn": func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
			go func() { callErr <- jsonrpc.ConnFromContext(ctx).Call(ctx, "host.wait", nil, nil) }()
			<-wait.started // the goroutine's call holds the reading
			return "spawned", nil
		},
		"quick": func(_ context.Context, req *jsonrpc.Request) (any, error) { return req.Params, nil },
	}
	host := jsonrpc.Methods{"host.wait": wait.handle}
	h, _ := pipePair(t, host, peer, nil, &jsonrpc.Options{Eager: allEager, EagerDeadline: time.Hour})
	var out string
	require.NoError(t, h.Call(t.Context(), "spawn", nil, &out))
	assert.Equal(t, "spawned", out)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for i := range 3 {
		var n []int
		require.NoError(t, h.Call(ctx, "quick", []int{i}, &n), "request %d after the handler returned", i)
		assert.Equal(t, []int{i}, n)
	}
	select {
	case err := <-callErr:
		assert.ErrorIs(t, err, context.Canceled)
	case <-ctx.Done():
		t.Fatal("the goroutine's call did not return once its context ended")
	}
	select {
	case <-wait.cancelled:
	case <-ctx.Done():
		t.Fatal("the goroutine's call did not cancel its request")
	}
}

// Once a call has read its own answer the handler holds the reading again
// under a fresh deadline: one that then blocks without looking at its
// context hands the reading on at the deadline, so a request behind it is
// served. The host answers the call only after a wait well past the
// deadline, so the deadline set when the handler started has passed
// during the call (without a fresh one, nothing would hand the reading on).
func TestEagerDeadlineAfterACallReadItsAnswer(t *testing.T) {
	blocked, release := make(chan struct{}), make(chan struct{})
	peer := jsonrpc.Methods{
		"call-then-block": func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
			if err := jsonrpc.ConnFromContext(ctx).Call(ctx, "host.late", nil, nil); err != nil {
				return nil, err
			}
			close(blocked)
			<-release
			return "released", nil
		},
		"quick": func(_ context.Context, req *jsonrpc.Request) (any, error) { return req.Params, nil },
	}
	host := jsonrpc.Methods{"host.late": func(context.Context, *jsonrpc.Request) (any, error) {
		time.Sleep(20 * time.Millisecond) // outlasts the peer's deadline; not a synchronisation
		return nil, nil
	}}
	h, _ := pipePair(t, host, peer, nil, &jsonrpc.Options{Eager: allEager, EagerDeadline: time.Millisecond})
	errc := make(chan error, 1)
	go func() { errc <- h.Call(t.Context(), "call-then-block", nil, nil) }()
	<-blocked
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	assert.NoError(t, h.Call(ctx, "quick", []int{1}, nil), "a request behind a blocked handler")
	close(release)
	assert.NoError(t, <-errc)
}
