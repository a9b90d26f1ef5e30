package overjsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/prototypes/transport/workload"
)

// WeakenEnv names the one promise ext-jsonrpc breaks, for the negative
// controls of the semantic checks (a check that passes them is broken).
const WeakenEnv = "TRANSPORT_WEAKEN"

// Weakenings are the broken promises, each with the check that must catch
// it. stdout_unmoved is applied by the binary itself (it leaves os.Stdout
// on the protocol stream).
var Weakenings = map[string]string{
	"swapped_echo":     "sequential_echo",
	"flattened_errors": "structured_errors",
	"lossy_upload":     "chunked_upload",
	"skipped_callback": "nested_callbacks",
	"stdout_unmoved":   "stray_stdout",
}

// Weaken returns m with the named promise broken; an unknown name or ""
// returns m as it is.
func Weaken(m jsonrpc.Methods, name string) jsonrpc.Methods {
	out := jsonrpc.Methods{}
	for k, v := range m {
		out[k] = v
	}
	switch name {
	case "swapped_echo":
		// Every seventh echo answers with the previous echo's params.
		var mu sync.Mutex
		var last json.RawMessage
		n := 0
		out[workload.MethodEcho] = func(_ context.Context, req *jsonrpc.Request) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			prev := last
			last = append(last[:0:0], req.Params...)
			if n++; n%7 == 0 && prev != nil {
				return prev, nil
			}
			return last, nil
		}
	case "flattened_errors":
		fail := m[workload.MethodFail]
		out[workload.MethodFail] = func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			_, err := fail(ctx, req)
			return nil, errors.New(err.Error())
		}
	case "lossy_upload":
		// Every fifth chunk is acknowledged but not kept.
		var n atomic.Int64
		chunk := m[workload.MethodChunk]
		out[workload.MethodChunk] = func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			if n.Add(1)%5 == 0 {
				var in workload.ChunkParams
				_ = req.DecodeParams(&in)
				return workload.ChunkAck{Bytes: in.Offset + int64(len(in.Data))}, nil
			}
			return chunk(ctx, req)
		}
	case "skipped_callback":
		// Claims the callbacks without making them.
		out[workload.MethodCallback] = func(_ context.Context, req *jsonrpc.Request) (any, error) {
			var in workload.CallbackParams
			if err := req.DecodeParams(&in); err != nil {
				return nil, err
			}
			return workload.CallbackResult{Count: in.N}, nil
		}
	}
	return out
}
