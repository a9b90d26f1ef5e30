package host

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// serveChunk is serve for artifact.write, whose params carry a chunk of up
// to protocol.MaxChunkBytes as base64: raw params go through the
// transport's decoder, which decodes a big base64 member straight into
// its []byte, several times faster than encoding/json, with the same
// outcome. The chunk is decoded into a buffer kept from an earlier chunk
// (chunkBuffers), not into new memory, which cost page faults on every
// chunk. f gets that buffer's slot in the pool: it may take p.Data's
// memory for itself by putting memory of its own, which it no longer
// uses, in the slot (artifactWrite swaps it with the buffer it writes
// from, rather than copying the chunk); otherwise f must not keep p.Data
// after it returns. The slot is nil when p.Data is not the pool's.
// Params the decoder refuses are decoded again as serve does, so the
// refusal reads the same.
func serveChunk[R any](method string, f func(*Service, context.Context, protocol.ArtifactWriteParams, *[]byte) (R, error)) serviceMethod {
	slow := serve(func(s *Service, ctx context.Context, p protocol.ArtifactWriteParams) (R, error) {
		return f(s, ctx, p, nil)
	})
	return func(s *Service, ctx context.Context, params any) (any, error) {
		raw, ok := params.(json.RawMessage)
		if !ok || len(raw) == 0 {
			return slow(s, ctx, params)
		}
		buf := chunkBuffers.Get().(*[]byte)
		defer chunkBuffers.Put(buf)
		p := protocol.ArtifactWriteParams{Data: (*buf)[:0]}
		req := jsonrpc.Request{Method: method, Params: raw}
		if err := req.DecodeParams(&p); err != nil || len(p.Data) == 0 {
			// Refused, or no chunk: serve's outcome (a missing data
			// member must stay nil, not the empty buffer).
			return slow(s, ctx, params)
		}
		if cap(p.Data) > chunkBufferBytes {
			return f(s, ctx, p, nil) // not memory the pool keeps
		}
		*buf = p.Data[:0] // the decode's memory, grown or not, is the slot's
		return f(s, ctx, p, buf)
	}
}

// chunkBufferBytes is what a decoded chunk can need: MaxChunkBytes and the
// slack of base64's DecodedLen.
const chunkBufferBytes = protocol.MaxChunkBytes + 3

// chunkBuffers holds decode buffers between artifact.write calls.
var chunkBuffers = sync.Pool{New: func() any { b := make([]byte, 0, chunkBufferBytes); return &b }}
