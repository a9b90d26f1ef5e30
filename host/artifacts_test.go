package host_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
