package host_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// TestServiceArtifactsAndRecovery: artifacts and recovery persistence go
// only through a run the host opened; chunks are bounded and each is
// acknowledged with the size so far; a chunk sent again is not written
// twice; a closed run refuses both.
func TestServiceArtifactsAndRecovery(t *testing.T) {
	for _, wire := range []bool{false, true} {
		name := map[bool]string{false: "in_process", true: "over_the_wire"}[wire]
		t.Run(name, func(t *testing.T) {
			fx := newFixture(t)
			st := fx.store.(*sqlite.Store)
			raw := manifestJSON("runx", "good", runnerProvides("runx"), nil)
			var svc *host.Service
			var c host.Caller
			if wire {
				p, _ := fx.process("runx", raw, func(cfg *host.Config) {
					svc = host.NewService(host.ServiceConfig{Manifest: cfg.Package.Manifest, Store: st, Blobs: st})
					cfg.Service = svc
					cfg.Configure = func() protocol.ConfigureParams { return protocol.ConfigureParams{} }
				})
				require.NoError(t, p.Start(ctxT(t)))
				c = relay{p}
			} else {
				m, err := protocol.ParseManifest(raw)
				require.NoError(t, err)
				svc = host.NewService(host.ServiceConfig{Manifest: m, Store: st, Blobs: st})
				c = svc
			}
			ctx := ctxT(t)
			var persisted []string
			run := svc.OpenRun("w1", "x1", func(_ context.Context, md json.RawMessage) error {
				persisted = append(persisted, string(md))
				return nil
			})
			require.NoError(t, c.Call(ctx, "execution.persist_recovery", protocol.ExecutionPersistRecoveryParams{RunID: run.ID, Recovery: json.RawMessage(`{"pid":1}`)}, nil))
			assert.Equal(t, []string{`{"pid":1}`}, persisted)
			assert.ErrorIs(t, c.Call(ctx, "execution.persist_recovery", protocol.ExecutionPersistRecoveryParams{RunID: "run_guess", Recovery: json.RawMessage(`{}`)}, nil), protocol.ErrNotFound)

			var art protocol.ArtifactCreateResult
			require.NoError(t, c.Call(ctx, "artifact.create", protocol.ArtifactCreateParams{RunID: run.ID, Name: "log.txt", MediaType: "text/plain"}, &art))
			chunk := bytes.Repeat([]byte("a"), 1000)
			var w protocol.ArtifactWriteResult
			require.NoError(t, c.Call(ctx, "artifact.write", protocol.ArtifactWriteParams{ArtifactID: art.ArtifactID, Offset: 0, Data: chunk}, &w))
			assert.Equal(t, int64(1000), w.Size)
			require.NoError(t, c.Call(ctx, "artifact.write", protocol.ArtifactWriteParams{ArtifactID: art.ArtifactID, Offset: 0, Data: chunk}, &w))
			assert.Equal(t, int64(1000), w.Size, "a chunk sent again is not written twice")
			err := c.Call(ctx, "artifact.write", protocol.ArtifactWriteParams{ArtifactID: art.ArtifactID, Offset: 1000,
				Data: make([]byte, protocol.MaxChunkBytes+1)}, nil)
			assert.ErrorIs(t, err, protocol.ErrInvalid)
			assert.ErrorIs(t, c.Call(ctx, "artifact.write", protocol.ArtifactWriteParams{ArtifactID: art.ArtifactID, Offset: 5000, Data: chunk}, nil), protocol.ErrInvalid)
			var done protocol.ArtifactCommitResult
			require.NoError(t, c.Call(ctx, "artifact.commit", protocol.ArtifactCommitParams{ArtifactID: art.ArtifactID, Size: 1000}, &done))
			sum := sha256.Sum256(chunk)
			assert.Equal(t, hex.EncodeToString(sum[:]), done.SHA256)
			require.NoError(t, st.View(ctx, func(tx runtime.ReadTx) error {
				a, err := tx.Artifact(art.ArtifactID)
				assert.Equal(t, "w1", a.WorkID)
				assert.Equal(t, int64(1000), a.Size)
				return err
			}))

			// An open artifact of a run that closes is aborted; the run refuses more.
			require.NoError(t, c.Call(ctx, "artifact.create", protocol.ArtifactCreateParams{RunID: run.ID, Name: "second"}, &art))
			svc.CloseRun(run.ID)
			assert.ErrorIs(t, c.Call(ctx, "artifact.write", protocol.ArtifactWriteParams{ArtifactID: art.ArtifactID, Data: chunk}, nil), protocol.ErrNotFound)
			assert.ErrorIs(t, c.Call(ctx, "artifact.create", protocol.ArtifactCreateParams{RunID: run.ID, Name: "third"}, nil), protocol.ErrNotFound)
			assert.ErrorIs(t, c.Call(ctx, "execution.persist_recovery", protocol.ExecutionPersistRecoveryParams{RunID: run.ID, Recovery: json.RawMessage(`{}`)}, nil), protocol.ErrNotFound)
		})
	}
}

func TestCloseBeforeStart(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("early", manifestJSON("early", "good", nil, nil))
	require.NoError(t, p.Close(ctxT(t)))
	assert.ErrorIs(t, p.Start(ctxT(t)), host.ErrClosed)
	assert.ErrorIs(t, p.Call(ctxT(t), "test.echo", []int{1}, nil), host.ErrClosed)
}

// failingBlobs is a blob store whose writers fail every write from the
// given one on (counting from 1), and record what happened to them.
type failingBlobs struct {
	runtime.BlobStore
	failFrom int
	mu       sync.Mutex
	writers  []*failingWriter
}

type failingWriter struct {
	runtime.BlobWriter
	failFrom, writes  int
	committed, abortd bool
}

func (b *failingBlobs) CreateBlob() (runtime.BlobWriter, error) {
	w, err := b.BlobStore.CreateBlob()
	if err != nil {
		return nil, err
	}
	fw := &failingWriter{BlobWriter: w, failFrom: b.failFrom}
	b.mu.Lock()
	b.writers = append(b.writers, fw)
	b.mu.Unlock()
	return fw, nil
}

var errDiskFull = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes >= w.failFrom {
		return 0, errDiskFull
	}
	return w.BlobWriter.Write(p)
}

func (w *failingWriter) Commit() (string, int64, error) {
	w.committed = true
	return w.BlobWriter.Commit()
}

func (w *failingWriter) Abort() error {
	w.abortd = true
	return w.BlobWriter.Abort()
}

// A chunk is acknowledged while the host writes it (the write overlaps
// with the extension encoding the next chunk), so a write that fails is
// reported by the next chunk and by the commit, and the artifact is never
// kept: nothing of a failed write is lost silently.
func TestArtifactWriteFailureFailsTheNextChunkAndTheCommit(t *testing.T) {
	fx := newFixture(t)
	st := fx.store.(*sqlite.Store)
	m, err := protocol.ParseManifest(manifestJSON("runx", "good", runnerProvides("runx"), nil))
	require.NoError(t, err)
	ctx := ctxT(t)
	chunk := bytes.Repeat([]byte("b"), 1000)
	write := func(c host.Caller, id string, off int64) error {
		return c.Call(ctx, "artifact.write", protocol.ArtifactWriteParams{ArtifactID: id, Offset: off, Data: chunk}, nil)
	}
	open := func(failFrom int) (*host.Service, *failingBlobs, string) {
		blobs := &failingBlobs{BlobStore: st, failFrom: failFrom}
		svc := host.NewService(host.ServiceConfig{Manifest: m, Store: st, Blobs: blobs})
		run := svc.OpenRun("w1", "x1", nil)
		var art protocol.ArtifactCreateResult
		require.NoError(t, svc.Call(ctx, "artifact.create", protocol.ArtifactCreateParams{RunID: run.ID, Name: "out"}, &art))
		return svc, blobs, art.ArtifactID
	}

	t.Run("the next chunk", func(t *testing.T) {
		svc, blobs, id := open(2)
		require.NoError(t, write(svc, id, 0))
		require.NoError(t, write(svc, id, 1000), "acknowledged while it is written")
		assert.ErrorIs(t, write(svc, id, 2000), protocol.ErrInternal)
		assert.ErrorIs(t, write(svc, id, 2000), protocol.ErrInternal, "the failure stays")
		assert.ErrorIs(t, svc.Call(ctx, "artifact.commit", protocol.ArtifactCommitParams{ArtifactID: id, Size: 2000}, nil), protocol.ErrInternal)
		assert.False(t, blobs.writers[0].committed)
		assert.True(t, blobs.writers[0].abortd)
	})
	t.Run("the commit", func(t *testing.T) {
		svc, blobs, id := open(2)
		require.NoError(t, write(svc, id, 0))
		require.NoError(t, write(svc, id, 1000))
		assert.ErrorIs(t, svc.Call(ctx, "artifact.commit", protocol.ArtifactCommitParams{ArtifactID: id, Size: 2000}, nil), protocol.ErrInternal)
		assert.False(t, blobs.writers[0].committed, "a blob that missed a chunk is not kept")
		assert.True(t, blobs.writers[0].abortd)
	})
	t.Run("a clean commit waits for the last write", func(t *testing.T) {
		svc, blobs, id := open(1000)
		for i := range 5 {
			require.NoError(t, write(svc, id, int64(i*1000)))
		}
		var done protocol.ArtifactCommitResult
		require.NoError(t, svc.Call(ctx, "artifact.commit", protocol.ArtifactCommitParams{ArtifactID: id, Size: 5000}, &done))
		sum := sha256.Sum256(bytes.Repeat(chunk, 5))
		assert.Equal(t, hex.EncodeToString(sum[:]), done.SHA256, "every chunk is in the digest")
		assert.Equal(t, 5, blobs.writers[0].writes)
	})
	t.Run("the caller's buffer is free once acknowledged", func(t *testing.T) {
		svc, _, id := open(1000)
		buf := bytes.Repeat([]byte("c"), 1000)
		require.NoError(t, svc.Call(ctx, "artifact.write", protocol.ArtifactWriteParams{ArtifactID: id, Data: buf}, nil))
		copy(buf, bytes.Repeat([]byte("d"), 1000)) // an in-process writer reusing its buffer
		var done protocol.ArtifactCommitResult
		require.NoError(t, svc.Call(ctx, "artifact.commit", protocol.ArtifactCommitParams{ArtifactID: id, Size: 1000}, &done))
		sum := sha256.Sum256(bytes.Repeat([]byte("c"), 1000))
		assert.Equal(t, hex.EncodeToString(sum[:]), done.SHA256)
	})
	t.Run("abort waits for the write in flight", func(t *testing.T) {
		svc, blobs, id := open(1000)
		require.NoError(t, write(svc, id, 0))
		require.NoError(t, svc.Call(ctx, "artifact.abort", protocol.ArtifactAbortParams{ArtifactID: id}, nil))
		assert.True(t, blobs.writers[0].abortd)
		assert.Equal(t, 1, blobs.writers[0].writes)
		assert.ErrorIs(t, write(svc, id, 1000), protocol.ErrNotFound)
	})
}

// gatedBlobs is a blob store whose first writer's first Write waits for
// gate to close.
type gatedBlobs struct {
	runtime.BlobStore
	gate    chan struct{}
	created int
}

type gatedWriter struct {
	runtime.BlobWriter
	gate chan struct{}
}

func (b *gatedBlobs) CreateBlob() (runtime.BlobWriter, error) {
	w, err := b.BlobStore.CreateBlob()
	if err != nil {
		return nil, err
	}
	b.created++
	if b.created > 1 {
		return w, nil
	}
	return &gatedWriter{BlobWriter: w, gate: b.gate}, nil
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	if w.gate != nil {
		<-w.gate
		w.gate = nil
	}
	return w.BlobWriter.Write(p)
}

// Over the wire a chunk's params arrive raw and are decoded into memory the
// host keeps between chunks, which the artifact takes over instead of
// copying. That memory is not decoded into again while its write is in
// flight: here the first artifact's first write waits until a chunk of a
// second artifact has been decoded and acknowledged, and both artifacts,
// written chunk by chunk in turn, keep their own bytes whole and in order.
func TestArtifactWriteRawChunksKeepTheirBytes(t *testing.T) {
	fx := newFixture(t)
	st := fx.store.(*sqlite.Store)
	m, err := protocol.ParseManifest(manifestJSON("runx", "good", runnerProvides("runx"), nil))
	require.NoError(t, err)
	ctx := ctxT(t)
	blobs := &gatedBlobs{BlobStore: st, gate: make(chan struct{})}
	svc := host.NewService(host.ServiceConfig{Manifest: m, Store: st, Blobs: blobs})
	run := svc.OpenRun("w1", "x1", nil)
	const chunks, size = 6, 64 << 10
	ids := make([]string, 2)
	sums := make([]hash.Hash, 2)
	for i := range ids {
		var art protocol.ArtifactCreateResult
		require.NoError(t, svc.Call(ctx, "artifact.create", protocol.ArtifactCreateParams{RunID: run.ID, Name: "out"}, &art))
		ids[i], sums[i] = art.ArtifactID, sha256.New()
	}
	for k := range chunks {
		for i, id := range ids {
			data := bytes.Repeat([]byte{byte(16*i + k + 1)}, size)
			sums[i].Write(data)
			raw, err := json.Marshal(protocol.ArtifactWriteParams{ArtifactID: id, Offset: int64(k * size), Data: data})
			require.NoError(t, err)
			var w protocol.ArtifactWriteResult
			require.NoError(t, svc.Call(ctx, "artifact.write", json.RawMessage(raw), &w))
			require.Equal(t, int64((k+1)*size), w.Size)
			if k == 0 && i == 1 {
				close(blobs.gate) // the first artifact's first chunk is written only now
			}
		}
	}
	for i, id := range ids {
		var done protocol.ArtifactCommitResult
		require.NoError(t, svc.Call(ctx, "artifact.commit", protocol.ArtifactCommitParams{ArtifactID: id, Size: chunks * size}, &done))
		assert.Equal(t, hex.EncodeToString(sums[i].Sum(nil)), done.SHA256, "artifact %d", i)
	}
}
