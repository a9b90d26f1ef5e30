package sdk

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// ArtifactWriter writes one artifact of a run in chunks of at most
// protocol.MaxChunkBytes, each acknowledged by the host before the next
// is sent: the acknowledgement is the backpressure. Writes are buffered
// up to one chunk; Flush sends what is buffered, Close flushes and
// commits the artifact, Abort discards it. An ArtifactWriter is not safe
// for concurrent use.
//
// Over the stdio transport (Serve, or a Host over a *jsonrpc.Conn) one
// chunk is in flight while the writer's caller goes on: Write and Flush
// send a chunk and return without waiting for its acknowledgement; the
// next chunk is encoded first (base64 and the transport's checks), then
// the writer waits for the acknowledgement before it, then sends it; so
// the host reads and acknowledges one chunk while this process encodes
// the next, and no chunk is sent before the one before it was
// acknowledged. Memory stays at one chunk of data and one encoded
// message. A failure of the chunk in flight (refused, acknowledged with
// the wrong size, the transport broken, ctx ended) is returned by the
// next Write or Flush that sends, or by Commit, and the writer stays
// failed; Commit, Close and Abort first wait for the chunk in flight.
// Over any other Caller each chunk is one Call and Write or Flush returns
// once it was acknowledged.
type ArtifactWriter struct {
	ctx  context.Context
	h    *Host
	id   string
	buf  []byte
	sent int64 // bytes sent: acknowledged or in flight
	err  error
	done bool

	conn     *jsonrpc.Conn    // nil: one Call per chunk
	next     jsonrpc.Outgoing // the next chunk's message, its memory kept
	inflight *jsonrpc.Pending // the chunk sent and not yet acknowledged
	want     int64            // the size its acknowledgement must say
}

// CreateArtifact opens an artifact of a run the host opened for this
// process. The writer's calls use ctx.
func (h *Host) CreateArtifact(ctx context.Context, p protocol.ArtifactCreateParams) (*ArtifactWriter, error) {
	var r protocol.ArtifactCreateResult
	if err := h.c.Call(ctx, "artifact.create", p, &r); err != nil {
		return nil, err
	}
	return &ArtifactWriter{ctx: ctx, h: h, id: r.ArtifactID, conn: h.rpcConn()}, nil
}

// rpcConn is the transport the Host calls through when it has one, for
// the requests it sends ahead of waiting for their answers.
func (h *Host) rpcConn() *jsonrpc.Conn {
	if h.rpc != nil {
		return h.rpc()
	}
	c, _ := h.c.(*jsonrpc.Conn)
	return c
}

// ID is the artifact's id.
func (w *ArtifactWriter) ID() string { return w.id }

// Size is how many bytes were written, buffered or sent.
func (w *ArtifactWriter) Size() int64 { return w.sent + int64(len(w.buf)) }

var errArtifactClosed = errors.New("sdk: artifact writer is closed")

// artifactBeforeSettle, when set (by tests), runs as the writer starts to
// wait for the acknowledgement of the chunk in flight: a chunk encoded
// ahead before it is sent, or Commit and Abort before they call.
var artifactBeforeSettle func()

// Write buffers p, sending every full chunk as it fills. A whole chunk of
// p met with nothing buffered is encoded from p itself, before Write
// returns, rather than copied first.
func (w *ArtifactWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errArtifactClosed
	}
	if w.err != nil {
		return 0, w.err
	}
	n := 0
	for len(p) > 0 {
		if len(w.buf) == 0 && len(p) >= protocol.MaxChunkBytes {
			if err := w.send(p[:protocol.MaxChunkBytes]); err != nil {
				return n, err
			}
			p, n = p[protocol.MaxChunkBytes:], n+protocol.MaxChunkBytes
			continue
		}
		room := protocol.MaxChunkBytes - len(w.buf)
		take := min(room, len(p))
		w.buf = append(w.buf, p[:take]...)
		p, n = p[take:], n+take
		if len(w.buf) == protocol.MaxChunkBytes {
			if err := w.Flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// Flush sends the buffered bytes as one chunk. Over the stdio transport it
// returns once the chunk is sent (see ArtifactWriter), else once it was
// acknowledged.
func (w *ArtifactWriter) Flush() error {
	if w.err != nil || len(w.buf) == 0 {
		return w.err
	}
	if err := w.send(w.buf); err != nil {
		return err
	}
	w.buf = w.buf[:0]
	return nil
}

// send sends data as the next chunk, which it has encoded by the time it
// returns, so data may then change.
func (w *ArtifactWriter) send(data []byte) error {
	params := protocol.ArtifactWriteParams{ArtifactID: w.id, Offset: w.sent, Data: data}
	want := w.sent + int64(len(data))
	if w.conn == nil {
		var r protocol.ArtifactWriteResult
		err := w.h.c.Call(w.ctx, "artifact.write", params, &r)
		if err == nil {
			err = w.checkAck(r, want)
		}
		if err != nil {
			w.err = err
			return err
		}
		w.sent = want
		return nil
	}
	// Encode while the chunk before is still being acknowledged.
	if err := w.conn.Prepare(&w.next, "artifact.write", params); err != nil {
		w.err = err
		return err
	}
	if err := w.settle(); err != nil {
		return err
	}
	p, err := w.next.Send(w.ctx)
	if err != nil {
		w.err = err
		return err
	}
	w.inflight, w.want, w.sent = p, want, want
	return nil
}

// settle waits for the chunk in flight, if any, and returns the writer's
// error, which its failure becomes.
func (w *ArtifactWriter) settle() error {
	p := w.inflight
	if p == nil {
		return w.err
	}
	w.inflight = nil
	if artifactBeforeSettle != nil {
		artifactBeforeSettle()
	}
	var r protocol.ArtifactWriteResult
	err := p.Wait(&r)
	if err == nil {
		err = w.checkAck(r, w.want)
	}
	if err != nil && w.err == nil {
		w.err = err
	}
	return w.err
}

// checkAck holds an acknowledgement to the size the writer sent; the host
// is not trusted to have taken what it was sent.
func (w *ArtifactWriter) checkAck(r protocol.ArtifactWriteResult, want int64) error {
	if r.Size != want {
		return fmt.Errorf("sdk: artifact %s: host acknowledged %d bytes, want %d", w.id, r.Size, want)
	}
	return nil
}

// Commit flushes and finishes the artifact so the host keeps it, once
// every chunk was acknowledged.
func (w *ArtifactWriter) Commit() (protocol.ArtifactCommitResult, error) {
	if w.done {
		return protocol.ArtifactCommitResult{}, errArtifactClosed
	}
	if err := w.Flush(); err != nil {
		return protocol.ArtifactCommitResult{}, err
	}
	if err := w.settle(); err != nil {
		return protocol.ArtifactCommitResult{}, err
	}
	var r protocol.ArtifactCommitResult
	if err := w.h.c.Call(w.ctx, "artifact.commit", protocol.ArtifactCommitParams{ArtifactID: w.id, Size: w.sent}, &r); err != nil {
		w.err = err // Abort may still discard it
		return r, err
	}
	w.done = true
	return r, nil
}

// Close commits the artifact; see Commit.
func (w *ArtifactWriter) Close() error {
	_, err := w.Commit()
	return err
}

// Abort discards the artifact, as the writer must when it cannot finish
// it, once the chunk in flight was answered (its failure does not stop
// the abort). After a successful Commit it does nothing.
func (w *ArtifactWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	_ = w.settle()
	return w.h.c.Call(w.ctx, "artifact.abort", protocol.ArtifactAbortParams{ArtifactID: w.id}, nil)
}
