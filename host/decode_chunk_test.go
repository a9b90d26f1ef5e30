package host

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

// decodedBy returns what a serviceMethod built by mk hands its function for
// params, or the refusal.
func decodedBy(mk func(func(*Service, context.Context, protocol.ArtifactWriteParams) (protocol.ArtifactWriteParams, error)) serviceMethod, params json.RawMessage) (protocol.ArtifactWriteParams, error) {
	m := mk(func(_ *Service, _ context.Context, p protocol.ArtifactWriteParams) (protocol.ArtifactWriteParams, error) {
		return p, nil
	})
	v, err := m(nil, context.Background(), params)
	if err != nil {
		return protocol.ArtifactWriteParams{}, err
	}
	return v.(protocol.ArtifactWriteParams), nil
}

// artifact.write's decoder gives what serve's gives, values and refusals
// alike, for chunks big and small, well formed or not.
func TestServeChunkDecodesAsServe(t *testing.T) {
	big := make([]byte, protocol.MaxChunkBytes)
	for i := range big {
		big[i] = byte(i * 31)
	}
	b64 := base64.StdEncoding.EncodeToString(big)
	cases := map[string]string{
		"big chunk":       fmt.Sprintf(`{"artifact_id":"art_1","offset":262144,"data":%q}`, b64),
		"small chunk":     `{"artifact_id":"art_1","offset":0,"data":"aGVsbG8="}`,
		"no data":         `{"artifact_id":"art_1","offset":3}`,
		"null":            `null`,
		"wrong type":      `{"artifact_id":"art_1","offset":"zero","data":"aGVsbG8="}`,
		"data not string": `{"artifact_id":"art_1","offset":0,"data":5}`,
		"bad base64":      fmt.Sprintf(`{"artifact_id":"art_1","offset":0,"data":%q}`, "!"+b64[1:]),
		"escaped big":     fmt.Sprintf(`{"artifact_id":"art_1","offset":0,"data":"\u0041%s"}`, b64[1:]),
		"unknown member":  fmt.Sprintf(`{"artifact_id":"art_1","offset":0,"extra":true,"data":%q}`, b64),
		"duplicate data":  fmt.Sprintf(`{"artifact_id":"art_1","data":"aGVsbG8=","offset":0,"data":%q}`, b64),
	}
	for name, params := range cases {
		t.Run(name, func(t *testing.T) {
			want, wantErr := decodedBy(serve, json.RawMessage(params))
			got, gotErr := decodedBy(func(f func(*Service, context.Context, protocol.ArtifactWriteParams) (protocol.ArtifactWriteParams, error)) serviceMethod {
				return serveChunk("artifact.write", func(s *Service, ctx context.Context, p protocol.ArtifactWriteParams, _ *[]byte) (protocol.ArtifactWriteParams, error) {
					return f(s, ctx, p)
				})
			}, json.RawMessage(params))
			if wantErr != nil {
				require.Error(t, gotErr)
				assert.Equal(t, wantErr.Error(), gotErr.Error())
				assert.ErrorIs(t, gotErr, protocol.ErrInvalidParams)
				return
			}
			require.NoError(t, gotErr)
			assert.Equal(t, want, got)
		})
	}
}

// BenchmarkArtifactWriteDecode decodes one 64 KiB chunk's params (87 KiB of
// base64) as serve does and as artifact.write now does, in the same run.
func BenchmarkArtifactWriteDecode(b *testing.B) {
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	params, err := json.Marshal(protocol.ArtifactWriteParams{ArtifactID: "art_1", Offset: 0, Data: chunk})
	require.NoError(b, err)
	identity := func(_ *Service, _ context.Context, p protocol.ArtifactWriteParams) (int, error) {
		return len(p.Data), nil
	}
	for name, m := range map[string]serviceMethod{
		"encoding-json": serve(identity),
		"transport": serveChunk("artifact.write", func(s *Service, ctx context.Context, p protocol.ArtifactWriteParams, _ *[]byte) (int, error) {
			return identity(s, ctx, p)
		}),
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(chunk)))
			for range b.N {
				n, err := m(nil, context.Background(), json.RawMessage(params))
				if err != nil || n.(int) != len(chunk) {
					b.Fatal(n, err)
				}
			}
		})
	}
}

// growPipe gives an extension's pipes 1 MiB of kernel buffer on Linux.
func TestGrowPipe(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pipe sizes are set on Linux only")
	}
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	const getPipeSize = 1032 // F_GETPIPE_SZ
	size := func() int {
		n, _, errno := syscall.Syscall(syscall.SYS_FCNTL, w.Fd(), getPipeSize, 0)
		require.Zero(t, errno)
		return int(n)
	}
	require.Less(t, size(), extensionPipeBytes, "a new pipe starts below the size growPipe sets")
	growPipe(w)
	assert.Equal(t, extensionPipeBytes, size())
}
