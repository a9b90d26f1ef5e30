package jsonrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/stretchr/testify/assert"
)

func TestTransportPipe(t *testing.T) {
	conformance.RunTransport(t, pipeDriver(nil))
}

func TestTransportSubprocess(t *testing.T) {
	conformance.RunTransport(t, subprocessDriver("peer"))
}

// The negative controls: peers that break one promise each. The suite must
// fail every one of them, naming the check that caught it.
func TestTransportNegativeControls(t *testing.T) {
	controls := []struct {
		name      string
		weaken    func(jsonrpc.Handler) jsonrpc.Handler
		wantCheck string
	}{
		{
			// Answers every seventh echo with the previous request's
			// params, as a transport that mixes up responses would.
			name:      "swapped_echo",
			weaken:    swapEveryNthEcho(7),
			wantCheck: "sequential_echo",
		},
		{
			// Flattens every error into an unauthored one.
			name: "flattened_errors",
			weaken: func(h jsonrpc.Handler) jsonrpc.Handler {
				return jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
					res, err := h.Handle(ctx, req)
					if err != nil {
						return nil, errors.New(err.Error())
					}
					return res, nil
				})
			},
			wantCheck: "structured_errors",
		},
		{
			// Drops every fifth chunk while acknowledging it.
			name: "lossy_upload",
			weaken: func(h jsonrpc.Handler) jsonrpc.Handler {
				var n atomic.Int64
				return jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
					if req.Method == "artifact.write" && n.Add(1)%5 == 0 {
						var in struct {
							Offset int64  `json:"offset"`
							Data   []byte `json:"data"`
						}
						_ = json.Unmarshal(req.Params, &in)
						return map[string]int64{"bytes": in.Offset + int64(len(in.Data))}, nil
					}
					return h.Handle(ctx, req)
				})
			},
			wantCheck: "chunked_upload",
		},
	}
	for _, c := range controls {
		t.Run(c.name, func(t *testing.T) {
			err := conformance.CheckTransport(t.Context(), pipeDriver(c.weaken))
			if assert.Error(t, err, "the suite passed a weakened peer") {
				assert.Contains(t, err.Error(), c.wantCheck+":")
			}
		})
	}
}

// A peer that leaves os.Stdout on the protocol stream: its stray output
// breaks the connection, and the suite must say so.
func TestTransportNegativeControlStrayStdout(t *testing.T) {
	err := conformance.CheckTransport(t.Context(), subprocessDriver("peer-stdout-unmoved"))
	if assert.Error(t, err, "the suite passed a peer that writes stray output on the protocol stream") {
		assert.Contains(t, err.Error(), "stray_stdout:")
		assert.ErrorIs(t, err, jsonrpc.ErrTransport)
	}
}

func swapEveryNthEcho(n int64) func(jsonrpc.Handler) jsonrpc.Handler {
	return func(h jsonrpc.Handler) jsonrpc.Handler {
		var count atomic.Int64
		var last atomic.Value
		return jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			if req.Method != "test.echo" {
				return h.Handle(ctx, req)
			}
			prev := last.Swap(req.Params)
			if count.Add(1)%n == 0 && prev != nil {
				return prev, nil
			}
			return req.Params, nil
		})
	}
}
