// Package overjsonrpc carries the workload over bare protocol/jsonrpc.
package overjsonrpc

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/prototypes/transport/workload"
)

// wireAuthored carries a workload.Authored over JSON-RPC as the protocol does:
// -32000 with the stable code in data.code.
type wireAuthored struct{ a *workload.Authored }

func (w wireAuthored) Error() string   { return w.a.Error() }
func (w wireAuthored) WireNumber() int { return jsonrpc.CodeAuthored }
func (w wireAuthored) WireData() (string, any) {
	return w.a.Message, map[string]string{"code": w.a.Code}
}

// WireError maps a handler's error onto the wire.
func WireError(err error) error {
	var a *workload.Authored
	if errors.As(err, &a) {
		return wireAuthored{a}
	}
	return err
}

// DecodeError turns an error response back into a workload.Authored.
func DecodeError(code int, message string, data json.RawMessage) error {
	if code != jsonrpc.CodeAuthored {
		return nil
	}
	var d struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(data, &d) != nil || d.Code == "" {
		return nil
	}
	return &workload.Authored{Code: d.Code, Message: message}
}

// Methods serves p over bare protocol/jsonrpc.
func Methods(p *workload.Peer) jsonrpc.Methods {
	typed := func(f func(ctx context.Context, req *jsonrpc.Request) (any, error)) jsonrpc.HandlerFunc {
		return func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			res, err := f(ctx, req)
			if err != nil {
				return nil, WireError(err)
			}
			return res, nil
		}
	}
	call := func(ctx context.Context) workload.HostCaller {
		return jsonrpc.ConnFromContext(ctx).Call
	}
	return jsonrpc.Methods{
		workload.MethodInitialize: typed(func(_ context.Context, req *jsonrpc.Request) (any, error) {
			var in workload.InitializeParams
			if err := req.DecodeParams(&in); err != nil {
				return nil, err
			}
			return p.Initialize(in)
		}),
		workload.MethodEcho: func(_ context.Context, req *jsonrpc.Request) (any, error) { return req.Params, nil },
		workload.MethodFail: typed(func(_ context.Context, req *jsonrpc.Request) (any, error) {
			var in workload.FailParams
			if err := req.DecodeParams(&in); err != nil {
				return nil, err
			}
			return nil, p.Fail(in)
		}),
		workload.MethodCallback: typed(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			var in workload.CallbackParams
			if err := req.DecodeParams(&in); err != nil {
				return nil, err
			}
			return p.Callback(ctx, call(ctx), in)
		}),
		workload.MethodPush: typed(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			var in workload.PushParams
			if err := req.DecodeParams(&in); err != nil {
				return nil, err
			}
			return p.Push(ctx, call(ctx), in)
		}),
		workload.MethodBlock: typed(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			var in workload.TokenParams
			if err := req.DecodeParams(&in); err != nil {
				return nil, err
			}
			return nil, p.Block(ctx, jsonrpc.ConnFromContext(ctx).Done(), in)
		}),
		workload.MethodBlockStart: typed(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			var in workload.TokenParams
			if err := req.DecodeParams(&in); err != nil {
				return nil, err
			}
			return p.BlockStarted(ctx, in)
		}),
		workload.MethodCancelSeen: typed(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			var in workload.TokenParams
			if err := req.DecodeParams(&in); err != nil {
				return nil, err
			}
			return p.CancelSeen(ctx, in)
		}),
		workload.MethodRelease: typed(func(_ context.Context, req *jsonrpc.Request) (any, error) {
			var in workload.TokenParams
			if err := req.DecodeParams(&in); err != nil {
				return nil, err
			}
			return p.Release(in), nil
		}),
		workload.MethodCrash:  typed(func(context.Context, *jsonrpc.Request) (any, error) { return nil, p.DoCrash() }),
		workload.MethodStdout: typed(func(context.Context, *jsonrpc.Request) (any, error) { return p.Print() }),
		workload.MethodChunk: typed(func(_ context.Context, req *jsonrpc.Request) (any, error) {
			var in workload.ChunkParams
			if err := req.DecodeParams(&in); err != nil {
				return nil, err
			}
			return p.Chunk(in)
		}),
		workload.MethodChunkCommit: typed(func(_ context.Context, req *jsonrpc.Request) (any, error) {
			var in workload.CommitParams
			if err := req.DecodeParams(&in); err != nil {
				return nil, err
			}
			return p.Commit(in)
		}),
	}
}

// Inline names the methods that answer from their params or memory, which
// the transport's reader serves itself (jsonrpc.Options.Inline); those that
// call back or wait run in goroutines of their own.
func Inline(method string, _ json.RawMessage) bool {
	switch method {
	case workload.MethodInitialize, workload.MethodEcho, workload.MethodFail, workload.MethodRelease,
		workload.MethodStdout, workload.MethodChunk, workload.MethodChunkCommit:
		return true
	}
	return false
}

// Eager names the methods that call the host back, which the transport's
// reader starts serving itself (jsonrpc.Options.Eager): their calls, made
// with the handler's own context, read their answers on that goroutine
// instead of a second one handing each over. Those that wait (block,
// cancel_seen) run in goroutines of their own, so that $/cancel finds them
// at once rather than at the Eager deadline.
func Eager(method string) bool {
	return method == workload.MethodCallback || method == workload.MethodPush
}
