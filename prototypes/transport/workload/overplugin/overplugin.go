// Package overplugin carries the workload over hashicorp/go-plugin and gRPC.
package overplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-plugin"
	"github.com/open-conduit/open-conduit/prototypes/transport/workload"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// go-plugin over gRPC. protoc is not in the toolchain, so the services are
// hand-written grpc.ServiceDescs whose one unary method carries the same
// JSON envelope as the other transports in a protobuf BytesValue. A host
// callback needs a second connection: the host serves HostService on a
// broker id it sends in initialize, and the extension dials it.

// Handshake is the go-plugin handshake of the prototype.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  workload.Version,
	MagicCookieKey:   "OPEN_CONDUIT_TRANSPORT_PROTOTYPE",
	MagicCookieValue: "bench",
}

// PluginName is the name the extension's plugin is dispensed under.
const PluginName = "bench"

// Envelope is a request over go-plugin: the method and its JSON params.
type Envelope struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// gRPC codes of the envelope's errors: authored errors cross as Aborted
// with a JSON body, an unknown method as Unimplemented, anything else as
// Internal with no detail.
type grpcAuthored struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func grpcError(err error) error {
	var a *workload.Authored
	switch {
	case err == nil:
		return nil
	case errors.As(err, &a):
		b, _ := json.Marshal(grpcAuthored{Code: a.Code, Message: a.Message})
		return status.Error(codes.Aborted, string(b))
	case errors.Is(err, workload.ErrUnknownMethod):
		return status.Error(codes.Unimplemented, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "cancelled")
	}
	return status.Error(codes.Internal, "internal error")
}

// DecodeGRPCError maps a gRPC error back onto the workload's errors.
func DecodeGRPCError(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%w: %v", workload.ErrBroken, err)
	}
	switch st.Code() {
	case codes.Aborted:
		var a grpcAuthored
		if json.Unmarshal([]byte(st.Message()), &a) == nil {
			return &workload.Authored{Code: a.Code, Message: a.Message}
		}
	case codes.Unimplemented:
		return fmt.Errorf("%w: %s", workload.ErrUnknownMethod, st.Message())
	case codes.Internal:
		return workload.ErrInternal
	case codes.Canceled:
		return context.Canceled
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	case codes.Unavailable:
		return fmt.Errorf("%w: %s", workload.ErrBroken, st.Message())
	}
	return fmt.Errorf("%w: %v", workload.ErrBroken, err)
}

// callServer is both services' server side: one envelope in, one out.
type callServer interface {
	Call(ctx context.Context, in *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error)
}

func callDesc(service string) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: service,
		HandlerType: (*callServer)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Call",
			Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.BytesValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				return srv.(callServer).Call(ctx, in)
			},
		}},
		Metadata: "transport.proto",
	}
}

var (
	extensionDesc = callDesc("transport.Extension")
	hostDesc      = callDesc("transport.Host")
)

// invoke makes one envelope call on cc.
func invoke(ctx context.Context, cc *grpc.ClientConn, service, method string, params, result any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	env, err := json.Marshal(Envelope{Method: method, Params: raw})
	if err != nil {
		return err
	}
	out := new(wrapperspb.BytesValue)
	if err := cc.Invoke(ctx, "/"+service+"/Call", wrapperspb.Bytes(env), out); err != nil {
		return DecodeGRPCError(err)
	}
	if result == nil {
		return nil
	}
	return json.Unmarshal(out.Value, result)
}

// envelopeHandler serves envelopes with a method table.
type envelopeHandler map[string]func(ctx context.Context, params json.RawMessage) (any, error)

func (h envelopeHandler) Call(ctx context.Context, in *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
	var env Envelope
	if err := json.Unmarshal(in.Value, &env); err != nil {
		return nil, status.Error(codes.InvalidArgument, "malformed envelope")
	}
	f, ok := h[env.Method]
	if !ok {
		return nil, grpcError(fmt.Errorf("%w: %q", workload.ErrUnknownMethod, env.Method))
	}
	res, err := f(ctx, env.Params)
	if err != nil {
		return nil, grpcError(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, grpcError(err)
	}
	return wrapperspb.Bytes(b), nil
}

func decodeInto[T any](params json.RawMessage) (T, error) {
	var v T
	if len(params) == 0 {
		return v, nil
	}
	if err := json.Unmarshal(params, &v); err != nil {
		return v, &workload.Authored{Code: "invalid_params", Message: err.Error()}
	}
	return v, nil
}

// ---- extension side ----

// ExtensionPlugin serves a workload.Peer over go-plugin.
type ExtensionPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Peer *workload.Peer

	// Host-side fields, used by GRPCClient.
	HostEcho func(workload.HostEcho) workload.HostEcho
	HostPush func(workload.PushParams) workload.PushAnswer
}

// GRPCServer registers the extension's service.
func (p *ExtensionPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	var mu sync.Mutex
	var hostConn *grpc.ClientConn
	done := make(chan struct{}) // never closed: the process ends with the host
	call := func(ctx context.Context, method string, params, result any) error {
		mu.Lock()
		cc := hostConn
		mu.Unlock()
		if cc == nil {
			return &workload.Authored{Code: "unsupported", Message: "no host connection yet"}
		}
		return invoke(ctx, cc, hostDesc.ServiceName, method, params, result)
	}
	peer := p.Peer
	s.RegisterService(extensionDesc, envelopeHandler{
		workload.MethodInitialize: func(_ context.Context, raw json.RawMessage) (any, error) {
			in, err := decodeInto[workload.InitializeParams](raw)
			if err != nil {
				return nil, err
			}
			res, err := peer.Initialize(in)
			if err != nil {
				return nil, err
			}
			cc, err := broker.Dial(in.BrokerID)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			hostConn = cc
			mu.Unlock()
			return res, nil
		},
		workload.MethodEcho: func(_ context.Context, raw json.RawMessage) (any, error) { return raw, nil },
		workload.MethodFail: func(_ context.Context, raw json.RawMessage) (any, error) {
			in, err := decodeInto[workload.FailParams](raw)
			if err != nil {
				return nil, err
			}
			return nil, peer.Fail(in)
		},
		workload.MethodCallback: func(ctx context.Context, raw json.RawMessage) (any, error) {
			in, err := decodeInto[workload.CallbackParams](raw)
			if err != nil {
				return nil, err
			}
			return peer.Callback(ctx, call, in)
		},
		workload.MethodPush: func(ctx context.Context, raw json.RawMessage) (any, error) {
			in, err := decodeInto[workload.PushParams](raw)
			if err != nil {
				return nil, err
			}
			return peer.Push(ctx, call, in)
		},
		workload.MethodBlock: func(ctx context.Context, raw json.RawMessage) (any, error) {
			in, err := decodeInto[workload.TokenParams](raw)
			if err != nil {
				return nil, err
			}
			return nil, peer.Block(ctx, done, in)
		},
		workload.MethodBlockStart: func(ctx context.Context, raw json.RawMessage) (any, error) {
			in, err := decodeInto[workload.TokenParams](raw)
			if err != nil {
				return nil, err
			}
			return peer.BlockStarted(ctx, in)
		},
		workload.MethodCancelSeen: func(ctx context.Context, raw json.RawMessage) (any, error) {
			in, err := decodeInto[workload.TokenParams](raw)
			if err != nil {
				return nil, err
			}
			return peer.CancelSeen(ctx, in)
		},
		workload.MethodRelease: func(_ context.Context, raw json.RawMessage) (any, error) {
			in, err := decodeInto[workload.TokenParams](raw)
			if err != nil {
				return nil, err
			}
			return peer.Release(in), nil
		},
		workload.MethodCrash:  func(context.Context, json.RawMessage) (any, error) { return nil, peer.DoCrash() },
		workload.MethodStdout: func(context.Context, json.RawMessage) (any, error) { return peer.Print() },
		workload.MethodChunk: func(_ context.Context, raw json.RawMessage) (any, error) {
			in, err := decodeInto[workload.ChunkParams](raw)
			if err != nil {
				return nil, err
			}
			return peer.Chunk(in)
		},
		workload.MethodChunkCommit: func(_ context.Context, raw json.RawMessage) (any, error) {
			in, err := decodeInto[workload.CommitParams](raw)
			if err != nil {
				return nil, err
			}
			return peer.Commit(in)
		},
	})
	return nil
}

// ---- host side ----

// PluginClient is the host's end of one go-plugin extension.
type PluginClient struct {
	cc       *grpc.ClientConn
	brokerID uint32
}

// BrokerID is where the host serves its callbacks; initialize sends it.
func (c *PluginClient) BrokerID() uint32 { return c.brokerID }

// Call makes one envelope call to the extension.
func (c *PluginClient) Call(ctx context.Context, method string, params, result any) error {
	return invoke(ctx, c.cc, extensionDesc.ServiceName, method, params, result)
}

// GRPCClient starts serving the host's callbacks on the broker and returns
// the extension's client.
func (p *ExtensionPlugin) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	id := broker.NextId()
	host := envelopeHandler{
		workload.MethodHostEcho: func(_ context.Context, raw json.RawMessage) (any, error) {
			in, err := decodeInto[workload.HostEcho](raw)
			if err != nil {
				return nil, err
			}
			return p.HostEcho(in), nil
		},
		workload.MethodHostPush: func(_ context.Context, raw json.RawMessage) (any, error) {
			in, err := decodeInto[workload.PushParams](raw)
			if err != nil {
				return nil, err
			}
			return p.HostPush(in), nil
		},
	}
	go broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(opts...)
		s.RegisterService(hostDesc, host)
		return s
	})
	return &PluginClient{cc: cc, brokerID: id}, nil
}
