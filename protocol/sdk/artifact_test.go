package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// heldHost is a host side whose artifact.write answers are held: each
// chunk's handler reports its arrival on arrived and answers with what
// the test sends on answer (the zero answer acknowledges what arrived).
type heldHost struct {
	arrived chan protocol.ArtifactWriteParams
	answer  chan heldAnswer
	// cancelled receives a chunk's offset when its handler's context ended
	// before the test answered it ($/cancel).
	cancelled chan int64

	// sent counts the messages the extension side has begun to write.
	sent atomic.Int64

	mu      sync.Mutex
	inside  int // artifact.write handlers running
	overlap bool
	aborted bool
	data    []byte
}

type heldAnswer struct {
	size int64 // 0: acknowledge offset+len(data)
	err  error
}

// newHeldHost connects an extension-side Host to a heldHost over a pair of
// OS pipes, as ServeConn's Host calls through a *jsonrpc.Conn.
func newHeldHost(t *testing.T) (*heldHost, *sdk.Host) {
	hh := &heldHost{arrived: make(chan protocol.ArtifactWriteParams, 4), answer: make(chan heldAnswer), cancelled: make(chan int64, 4)}
	r1, w1, err := os.Pipe()
	require.NoError(t, err)
	r2, w2, err := os.Pipe()
	require.NoError(t, err)
	hostSide := jsonrpc.NewConn(r1, w2, jsonrpc.Methods{
		"artifact.create": func(context.Context, *jsonrpc.Request) (any, error) {
			return protocol.ArtifactCreateResult{ArtifactID: "art-1"}, nil
		},
		"artifact.write": hh.write,
		"artifact.commit": func(_ context.Context, req *jsonrpc.Request) (any, error) {
			var p protocol.ArtifactCommitParams
			if err := json.Unmarshal(req.Params, &p); err != nil {
				return nil, err
			}
			hh.mu.Lock()
			defer hh.mu.Unlock()
			if p.Size != int64(len(hh.data)) {
				return nil, protocol.NewError(protocol.CodeConflict, "size")
			}
			return protocol.ArtifactCommitResult{Size: p.Size}, nil
		},
		"artifact.abort": func(context.Context, *jsonrpc.Request) (any, error) {
			hh.mu.Lock()
			defer hh.mu.Unlock()
			hh.aborted = true
			return struct{}{}, nil
		},
	}, &jsonrpc.Options{DecodeError: sdk.DecodeError})
	extSide := jsonrpc.NewConn(r2, countedWriter{w1, &hh.sent}, nil, &jsonrpc.Options{DecodeError: sdk.DecodeError})
	t.Cleanup(func() { extSide.Close(); hostSide.Close() })
	return hh, sdk.NewHost(extSide, nil)
}

// countedWriter counts the messages written through it: the transport
// writes one whole message per Write.
type countedWriter struct {
	io.WriteCloser
	n *atomic.Int64
}

func (c countedWriter) Write(b []byte) (int, error) {
	c.n.Add(1)
	return c.WriteCloser.Write(b)
}

func (hh *heldHost) write(ctx context.Context, req *jsonrpc.Request) (any, error) {
	var p protocol.ArtifactWriteParams
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return nil, err
	}
	hh.mu.Lock()
	hh.inside++
	hh.overlap = hh.overlap || hh.inside > 1
	hh.mu.Unlock()
	defer func() { hh.mu.Lock(); hh.inside--; hh.mu.Unlock() }()
	select {
	case hh.arrived <- p:
	case <-ctx.Done(): // a weakened writer sent more than the test takes
		return nil, ctx.Err()
	}
	select {
	case a := <-hh.answer:
		if a.err != nil {
			return nil, a.err
		}
		hh.mu.Lock()
		hh.data = append(hh.data, p.Data...)
		hh.mu.Unlock()
		if a.size == 0 {
			a.size = p.Offset + int64(len(p.Data))
		}
		return protocol.ArtifactWriteResult{Size: a.size}, nil
	case <-ctx.Done():
		hh.cancelled <- p.Offset
		return nil, ctx.Err()
	}
}

func chunkOf(b byte) []byte { return bytes.Repeat([]byte{b}, protocol.MaxChunkBytes) }

// promiseBound is how long a step the writer promises may take before the
// test fails, naming the promise: far beyond what the step takes, far
// within the test's timeout, so that a writer that breaks the promise
// fails by an assertion, not by hanging.
const promiseBound = 10 * time.Second

// await returns what ch yields, or fails the test: promise is what the
// writer broke if nothing came.
func await[T any](t *testing.T, ch <-chan T, promise string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(promiseBound):
		t.Fatalf("%s: nothing within %v", promise, promiseBound)
		panic("unreachable")
	}
}

// answerHeld gives a held chunk its answer, or fails the test if no chunk was
// held for it within the bound.
func (hh *heldHost) answerHeld(t *testing.T, a heldAnswer, promise string) {
	t.Helper()
	select {
	case hh.answer <- a:
	case <-time.After(promiseBound):
		t.Fatalf("%s: no chunk held at the host within %v", promise, promiseBound)
	}
}

// returns runs f on a goroutine of its own and returns its error, or fails
// the test if f blocked past the bound (closing the connections at the
// end of the test frees it).
func returns(t *testing.T, promise string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	return await(t, done, promise)
}

// TestArtifactWriterSendsOnlyOnceTheChunkBeforeIsAcknowledged: Write
// returns once its chunk is sent, before the host acknowledges it; the
// next chunk is encoded while the first is held and is sent only after the
// first one's acknowledgement; Commit waits for the chunk in flight before
// it calls.
func TestArtifactWriterSendsOnlyOnceTheChunkBeforeIsAcknowledged(t *testing.T) {
	ctx := testContext(t)
	hh, host := newHeldHost(t)
	// waiting receives, as the writer starts to wait for the chunk in
	// flight, how many messages it had sent by then.
	waiting := make(chan int64, 4)
	defer sdk.SetArtifactBeforeSettle(func() { waiting <- hh.sent.Load() })()
	w, err := host.CreateArtifact(ctx, protocol.ArtifactCreateParams{RunID: "run-1", Name: "a"})
	require.NoError(t, err)

	first, second := chunkOf('a'), chunkOf('b')
	require.NoError(t, returns(t, "Write returns before the host acknowledges its chunk", func() error {
		n, err := w.Write(first)
		if err == nil && n != len(first) {
			err = fmt.Errorf("wrote %d of %d bytes", n, len(first))
		}
		return err
	}))
	got := await(t, hh.arrived, "Write sends its chunk")
	assert.Equal(t, int64(0), got.Offset)
	copy(first, chunkOf('x')) // Write encoded the chunk before it returned

	wrote := make(chan error, 1)
	go func() { _, err := w.Write(second); wrote <- err }()
	sent := await(t, waiting, "the second chunk waits for the first one's acknowledgement")
	assert.EqualValues(t, 2, sent, "sent before the first chunk was acknowledged: more than artifact.create and the first chunk")
	select {
	case p := <-hh.arrived:
		t.Fatalf("chunk at %d sent before the chunk before it was acknowledged", p.Offset)
	default:
	}
	hh.answerHeld(t, heldAnswer{}, "the first chunk is held at the host")
	got = await(t, hh.arrived, "the second chunk is sent once the first is acknowledged")
	assert.Equal(t, int64(protocol.MaxChunkBytes), got.Offset)
	require.NoError(t, await(t, wrote, "the second Write returns once the first chunk is acknowledged"))

	committed := make(chan error, 1)
	go func() { _, err := w.Commit(); committed <- err }()
	sent = await(t, waiting, "Commit waits for the chunk in flight")
	assert.EqualValues(t, 3, sent, "Commit called before the chunk in flight was acknowledged")
	hh.answerHeld(t, heldAnswer{}, "the second chunk is held at the host while Commit waits")
	require.NoError(t, await(t, committed, "Commit returns once the chunk in flight is acknowledged"))
	hh.mu.Lock()
	defer hh.mu.Unlock()
	assert.Equal(t, append(chunkOf('a'), chunkOf('b')...), hh.data)
	assert.False(t, hh.overlap, "two chunks were at the host at once")
}

// TestArtifactWriterFailureInFlight: a refusal, a short acknowledgement or
// the end of ctx while a chunk is in flight is what the next Write (or
// Commit) returns, and the writer stays failed; Abort still discards.
func TestArtifactWriterFailureInFlight(t *testing.T) {
	// Worded apart from the host's refusal of a commit, so that a Commit
	// that does not wait for the chunk in flight cannot pass for one that
	// returns its refusal.
	refused := protocol.NewError(protocol.CodeConflict, "offset is not the artifact's size")
	for _, tc := range []struct {
		name   string
		answer heldAnswer
		cancel bool
		want   func(t *testing.T, err error)
	}{
		{"refused", heldAnswer{err: refused}, false, func(t *testing.T, err error) {
			assert.ErrorIs(t, err, protocol.ErrConflict)
			assert.ErrorContains(t, err, "offset is not the artifact's size")
		}},
		{"short acknowledgement", heldAnswer{size: 5}, false, func(t *testing.T, err error) {
			assert.ErrorContains(t, err, fmt.Sprintf("host acknowledged 5 bytes, want %d", protocol.MaxChunkBytes))
		}},
		{"cancelled", heldAnswer{}, true, func(t *testing.T, err error) { assert.ErrorIs(t, err, context.Canceled) }},
	} {
		for _, next := range []string{"write", "commit"} {
			t.Run(tc.name+"/"+next, func(t *testing.T) {
				ctx, cancel := context.WithCancel(testContext(t))
				defer cancel()
				hh, host := newHeldHost(t)
				w, err := host.CreateArtifact(ctx, protocol.ArtifactCreateParams{RunID: "run-1", Name: "a"})
				require.NoError(t, err)
				require.NoError(t, returns(t, "Write returns before the host acknowledges its chunk", func() error {
					_, err := w.Write(chunkOf('a'))
					return err
				}), "sent, not yet acknowledged")
				await(t, hh.arrived, "Write sends its chunk")
				if tc.cancel {
					cancel()
				} else {
					hh.answerHeld(t, tc.answer, "the chunk is held at the host")
				}
				err = returns(t, "the "+next+" after a failure in flight returns", func() error {
					switch next {
					case "write":
						_, err := w.Write(chunkOf('b'))
						return err
					default:
						_, err := w.Commit()
						return err
					}
				})
				require.Error(t, err, "the %s after a failure in flight returns it", next)
				if tc.cancel {
					assert.Equal(t, int64(0), await(t, hh.cancelled, "the chunk in flight is cancelled at the host when ctx ends"))
				}
				tc.want(t, err)
				select {
				case p := <-hh.arrived:
					t.Fatalf("chunk at %d sent after the one before it failed", p.Offset)
				default:
				}
				again := returns(t, "a Write on a failed writer returns", func() error {
					_, err := w.Write([]byte("more"))
					return err
				})
				assert.Equal(t, err, again, "the writer stays failed")
				assert.Equal(t, err, returns(t, "a Flush on a failed writer returns", w.Flush))
				again = returns(t, "a Commit on a failed writer returns", func() error {
					_, err := w.Commit()
					return err
				})
				assert.Equal(t, err, again)
				if !tc.cancel {
					require.NoError(t, returns(t, "Abort returns", w.Abort))
					hh.mu.Lock()
					assert.True(t, hh.aborted)
					hh.mu.Unlock()
				}
			})
		}
	}
}
