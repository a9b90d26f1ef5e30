package sdk

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/protocol"
)

// ArtifactWriter writes one artifact of a run in chunks of at most
// protocol.MaxChunkBytes, each acknowledged by the host before the next
// is sent: the acknowledgement is the backpressure. Writes are buffered
// up to one chunk; Flush sends what is buffered, Close flushes and
// commits the artifact, Abort discards it. An ArtifactWriter is not safe
// for concurrent use.
type ArtifactWriter struct {
	ctx  context.Context
	h    *Host
	id   string
	buf  []byte
	sent int64 // bytes the host acknowledged
	err  error
	done bool
}

// CreateArtifact opens an artifact of a run the host opened for this
// process. The writer's calls use ctx.
func (h *Host) CreateArtifact(ctx context.Context, p protocol.ArtifactCreateParams) (*ArtifactWriter, error) {
	var r protocol.ArtifactCreateResult
	if err := h.c.Call(ctx, "artifact.create", p, &r); err != nil {
		return nil, err
	}
	return &ArtifactWriter{ctx: ctx, h: h, id: r.ArtifactID}, nil
}

// ID is the artifact's id.
func (w *ArtifactWriter) ID() string { return w.id }

// Size is how many bytes were written, buffered or sent.
func (w *ArtifactWriter) Size() int64 { return w.sent + int64(len(w.buf)) }

var errArtifactClosed = errors.New("sdk: artifact writer is closed")

// Write buffers p, sending every full chunk as it fills.
func (w *ArtifactWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errArtifactClosed
	}
	if w.err != nil {
		return 0, w.err
	}
	n := 0
	for len(p) > 0 {
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

// Flush sends the buffered bytes as one chunk and waits for its
// acknowledgement.
func (w *ArtifactWriter) Flush() error {
	if w.err != nil || len(w.buf) == 0 {
		return w.err
	}
	var r protocol.ArtifactWriteResult
	err := w.h.c.Call(w.ctx, "artifact.write", protocol.ArtifactWriteParams{ArtifactID: w.id, Offset: w.sent, Data: w.buf}, &r)
	if err == nil && r.Size != w.sent+int64(len(w.buf)) {
		err = fmt.Errorf("sdk: artifact %s: host acknowledged %d bytes, want %d", w.id, r.Size, w.sent+int64(len(w.buf)))
	}
	if err != nil {
		w.err = err
		return err
	}
	w.sent = r.Size
	w.buf = w.buf[:0]
	return nil
}

// Commit flushes and finishes the artifact so the host keeps it.
func (w *ArtifactWriter) Commit() (protocol.ArtifactCommitResult, error) {
	if w.done {
		return protocol.ArtifactCommitResult{}, errArtifactClosed
	}
	if err := w.Flush(); err != nil {
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
// it. After a successful Commit it does nothing.
func (w *ArtifactWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	return w.h.c.Call(w.ctx, "artifact.abort", protocol.ArtifactAbortParams{ArtifactID: w.id}, nil)
}
