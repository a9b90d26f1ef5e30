package sdk

import (
	"context"
	"encoding/json"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// methodFunc serves one method with wire params in either form.
type methodFunc func(s *server, ctx context.Context, params any) (any, error)

// dispatch is the table of host-to-extension methods the SDK serves after
// initialize, one entry per method; Serve and Attach share it. The
// lifecycle methods initialize and shutdown are handled before it.
var dispatch map[string]methodFunc

func init() {
	dispatch = map[string]methodFunc{
		"configure": serveWith((*server).configure),
		"validate":  serveWith((*server).validate),

		"route.match": serveWith(func(s *server, ctx context.Context, p protocol.RouteMatchParams) (protocol.RouteMatchResult, error) {
			r, err := named(s.ext.Routes, "route handler", p.Handler)
			if err != nil {
				return protocol.RouteMatchResult{}, err
			}
			ok, reason, err := s.readable(&p.Event)
			if err != nil || !ok {
				return protocol.RouteMatchResult{Match: false, Reason: reason}, err
			}
			return r.Match(ctx, p)
		}),
		"route.samples": serveWith(func(s *server, ctx context.Context, p protocol.RouteSamplesParams) (protocol.RouteSamplesResult, error) {
			r, err := named(s.ext.Routes, "route handler", p.Handler)
			if err != nil {
				return protocol.RouteSamplesResult{}, err
			}
			if r.Samples == nil {
				return protocol.RouteSamplesResult{}, protocol.Errorf(protocol.CodeUndeclared, "route handler %q offers no samples", p.Handler)
			}
			return r.Samples(ctx, p)
		}),

		"ingress.push": serveWith(func(s *server, ctx context.Context, p protocol.IngressPushParams) (protocol.IngressPushResult, error) {
			in, err := named(s.ext.Ingress, "ingress type", p.Type)
			if err != nil {
				return protocol.IngressPushResult{}, err
			}
			if in.Push == nil {
				return protocol.IngressPushResult{}, protocol.Errorf(protocol.CodeUnsupported, "ingress type %q takes no pushed deliveries", p.Type)
			}
			return in.Push(ctx, s.host, p)
		}),
		"ingress.reconcile": serveWith(func(s *server, ctx context.Context, p protocol.IngressReconcileParams) (protocol.IngressReconcileResult, error) {
			in, err := named(s.ext.Ingress, "ingress type", p.Type)
			if err != nil {
				return protocol.IngressReconcileResult{}, err
			}
			if in.Reconcile == nil {
				return protocol.IngressReconcileResult{}, protocol.Errorf(protocol.CodeUnsupported, "ingress type %q does not reconcile", p.Type)
			}
			return in.Reconcile(ctx, s.host, p)
		}),

		"webhook.handle": serveWith(serveWebhook),
		"telemetry.sink": serveWith(serveTelemetrySink),

		"operation.call": serveOperationCall,
		"operation.wait": serveWith(func(s *server, ctx context.Context, p protocol.OperationWaitParams) (protocol.OperationWaitResult, error) {
			op, err := operation(s, p.Operation, protocol.OperationKindWait)
			if err != nil {
				return protocol.OperationWaitResult{}, err
			}
			return op.Wait(ctx, s.host, p)
		}),
		"operation.emit": serveWith(func(s *server, ctx context.Context, p protocol.OperationEmitParams) (protocol.OperationEmitResult, error) {
			op, err := operation(s, p.Operation, protocol.OperationKindEmit)
			if err != nil {
				return protocol.OperationEmitResult{}, err
			}
			return op.Emit(ctx, s.host, p)
		}),
		"emit.commit": serveWith(func(s *server, ctx context.Context, p protocol.EmitCommitParams) (protocol.EmitCommitResult, error) {
			op, err := operation(s, p.Operation, protocol.OperationKindEmit)
			if err != nil {
				return protocol.EmitCommitResult{}, err
			}
			if op.Commit == nil {
				return protocol.EmitCommitResult{}, protocol.Errorf(protocol.CodeUndeclared, "operation %q does not commit", p.Operation)
			}
			return op.Commit(ctx, p)
		}),
		"dependency.filter": serveWith(func(s *server, ctx context.Context, p protocol.DependencyFilterParams) (protocol.DependencyFilterResult, error) {
			op, err := operation(s, p.Operation, protocol.OperationKindWait)
			if err != nil {
				return protocol.DependencyFilterResult{}, err
			}
			if op.DependencyFilter == nil {
				return protocol.DependencyFilterResult{}, protocol.Errorf(protocol.CodeUndeclared, "operation %q has no dependency filter", p.Operation)
			}
			ok, _, err := s.readable(&p.Event)
			if err != nil || !ok {
				return protocol.DependencyFilterResult{Match: false}, err
			}
			return op.DependencyFilter(ctx, p)
		}),

		"recurrence.next": serveWith(func(s *server, ctx context.Context, p protocol.RecurrenceNextParams) (protocol.RecurrenceNextResult, error) {
			f, err := named(s.ext.Recurrences, "recurrence", p.Recurrence)
			if err != nil {
				return protocol.RecurrenceNextResult{}, err
			}
			return f(ctx, p)
		}),
		"work_kind.trigger": serveWith(func(s *server, ctx context.Context, p protocol.WorkKindTriggerParams) (protocol.WorkKindTriggerResult, error) {
			f, err := named(s.ext.Triggers, "work kind with trigger", p.Kind)
			if err != nil {
				return protocol.WorkKindTriggerResult{}, err
			}
			readable := p.Inputs[:0:0]
			for _, ev := range p.Inputs {
				ok, _, err := s.readable(&ev)
				if err != nil {
					return protocol.WorkKindTriggerResult{}, err
				}
				if ok {
					readable = append(readable, ev)
				}
			}
			if len(readable) == 0 {
				// Nothing the handler may read: the first input, as the
				// runtime would pick.
				if len(p.Inputs) == 0 {
					return protocol.WorkKindTriggerResult{}, protocol.Errorf(protocol.CodeInvalid, "work kind %q trigger: no inputs", p.Kind)
				}
				return protocol.WorkKindTriggerResult{Trigger: p.Inputs[0].ID}, nil
			}
			p.Inputs = readable
			return f(ctx, p)
		}),

		"task.run": serveWith(func(s *server, ctx context.Context, p protocol.TaskRunParams) (protocol.TaskRunResult, error) {
			f, err := named(s.ext.Tasks, "task", p.Task)
			if err != nil {
				return protocol.TaskRunResult{}, err
			}
			return f(ctx, s.host, p)
		}),
		"check.run": serveWith(func(s *server, ctx context.Context, p protocol.CheckRunParams) (protocol.CheckRunResult, error) {
			f, err := named(s.ext.Checks, "check", p.Check)
			if err != nil {
				return protocol.CheckRunResult{}, err
			}
			return f(ctx, s.host, p)
		}),

		"executor.run": serveWith(func(s *server, ctx context.Context, p protocol.ExecutorRunParams) (protocol.ExecutorRunResult, error) {
			return executorCall(s, ctx, p.Executor, "run", func(x Executor) Func[protocol.ExecutorRunParams, protocol.ExecutorRunResult] { return x.Run }, p)
		}),
		"executor.wait": serveWith(func(s *server, ctx context.Context, p protocol.ExecutorWaitParams) (protocol.ExecutorWaitResult, error) {
			return executorCall(s, ctx, p.Executor, "wait", func(x Executor) Func[protocol.ExecutorWaitParams, protocol.ExecutorWaitResult] { return x.Wait }, p)
		}),
		"executor.recover": serveWith(func(s *server, ctx context.Context, p protocol.ExecutorRecoverParams) (protocol.ExecutorRecoverResult, error) {
			return executorCall(s, ctx, p.Executor, "recover", func(x Executor) Func[protocol.ExecutorRecoverParams, protocol.ExecutorRecoverResult] {
				return x.Recover
			}, p)
		}),
		"executor.resume": serveWith(func(s *server, ctx context.Context, p protocol.ExecutorResumeParams) (protocol.ExecutorResumeResult, error) {
			return executorCall(s, ctx, p.Executor, "resume", func(x Executor) Func[protocol.ExecutorResumeParams, protocol.ExecutorResumeResult] { return x.Resume }, p)
		}),
		"executor.inject": serveWith(func(s *server, ctx context.Context, p protocol.ExecutorInjectParams) (protocol.ExecutorInjectResult, error) {
			return executorCall(s, ctx, p.Executor, "inject", func(x Executor) Func[protocol.ExecutorInjectParams, protocol.ExecutorInjectResult] { return x.Inject }, p)
		}),
		"executor.interrupt": serveWith(func(s *server, ctx context.Context, p protocol.ExecutorInterruptParams) (protocol.ExecutorInterruptResult, error) {
			return executorCall(s, ctx, p.Executor, "interrupt", func(x Executor) Func[protocol.ExecutorInterruptParams, protocol.ExecutorInterruptResult] {
				return x.Interrupt
			}, p)
		}),
		"executor.stop": serveWith(func(s *server, ctx context.Context, p protocol.ExecutorStopParams) (protocol.ExecutorStopResult, error) {
			return executorCall(s, ctx, p.Executor, "stop", func(x Executor) Func[protocol.ExecutorStopParams, protocol.ExecutorStopResult] { return x.Stop }, p)
		}),
		"executor.forget": serveWith(func(s *server, ctx context.Context, p protocol.ExecutorForgetParams) (protocol.ExecutorForgetResult, error) {
			return executorCall(s, ctx, p.Executor, "forget", func(x Executor) Func[protocol.ExecutorForgetParams, protocol.ExecutorForgetResult] { return x.Forget }, p)
		}),
		"executor.attach": serveWith(func(s *server, ctx context.Context, p protocol.ExecutorAttachParams) (protocol.ExecutorAttachResult, error) {
			return executorCall(s, ctx, p.Executor, "attach", func(x Executor) Func[protocol.ExecutorAttachParams, protocol.ExecutorAttachResult] { return x.Attach }, p)
		}),
		"executor.live": serveWith(func(s *server, ctx context.Context, p protocol.ExecutorLiveParams) (protocol.ExecutorLiveResult, error) {
			return executorCall(s, ctx, p.Executor, "live", func(x Executor) Func[protocol.ExecutorLiveParams, protocol.ExecutorLiveResult] { return x.Live }, p)
		}),
	}
}

// serveWith adapts a typed method to a methodFunc: it decodes the params
// (a wire value or JSON) and returns the typed result. Over the wire a
// result with a hand-written encoder (protocol.JSONAppender: operation.call's,
// webhook.handle's) is a jsonrpc.Appender, which the transport has write
// itself straight into the message, checked against the strict rule there,
// instead of through encoding/json's reflection (it used to be encoded into
// a copy of its own first).
func serveWith[P, R any](f func(s *server, ctx context.Context, p P) (R, error)) methodFunc {
	return func(s *server, ctx context.Context, params any) (any, error) {
		p, err := protocol.DecodeParams[P](plainParams(params))
		if err != nil {
			return nil, err
		}
		r, err := f(s, ctx, p)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// callOperation serves operation.call once its params are decoded.
func callOperation(s *server, ctx context.Context, p protocol.OperationCallParams) (protocol.OperationCallResult, error) {
	op, err := operation(s, p.Operation, protocol.OperationKindHandler)
	if err != nil {
		return protocol.OperationCallResult{}, err
	}
	if op.Pure != nil {
		return op.Pure(p)
	}
	return op.Handler(ctx, s.host, p)
}

// operationCallName reads the operation operation.call's params name, for
// servedInline (a variable for the negative control of the test that
// shows why it reads only plain names).
var operationCallName = protocol.OperationCallName

// servedInline says which requests the transport's reader serves itself
// (jsonrpc.Options.Inline): operation.call for an Operation with Pure, as
// the params name it (protocol.OperationCallName). The name is read only
// where every decoder reads the same one, so the call the reader serves
// is the Pure one the dispatch finds: params that name an operation
// otherwise (a folded or repeated member, an escape) go the way of every
// other operation.call, started on the reader with its deadline
// (servedEager), and so do an operation with Handler and one not
// declared. Those few bytes are read on every operation.call
// (BenchmarkServedInline), and not at all by an extension with no Pure
// operation.
func (s *server) servedInline(method string, params json.RawMessage) bool {
	if !s.anyPure || method != "operation.call" {
		return false
	}
	name, ok := operationCallName(params)
	if !ok {
		return false
	}
	e, ok := s.operations[string(name)]
	return ok && e.op.Pure != nil && e.declared && e.kind == protocol.OperationKindHandler
}

var serveOperationCallWith = serveWith(callOperation)

// serveOperationCall is operation.call's methodFunc, the toolbelt's call
// and the hottest request an extension serves. Over the wire it is
// serveWith with the params decoded by their codec into a value on the
// stack (protocol.DecodeParams puts its value on the heap), as the
// transport checked them (DecodeCheckedJSON: one JSON value keeping the
// strict rule, so their syntax and UTF-8 are not checked again), their
// input aliasing the request's own copy of them, which nothing writes
// (ServeConn does not set ReuseParams). Params the codec refuses, and the
// in-process forms, which no transport checked, take serveWith, whose
// errors are the ones to give.
func serveOperationCall(s *server, ctx context.Context, params any) (any, error) {
	req, wire := params.(*jsonrpc.Request)
	if !wire || len(req.Params) == 0 {
		return serveOperationCallWith(s, ctx, params)
	}
	var p protocol.OperationCallParams
	if p.DecodeCheckedJSON(req.Params) != nil {
		return serveOperationCallWith(s, ctx, params)
	}
	r, err := callOperation(s, ctx, p)
	if err != nil {
		return nil, err
	}
	if c, ok := ctx.(*inflightCall); ok {
		c.result = r
		return &c.result, nil // a *OperationCallResult appends as one
	}
	return r, nil
}

// plainParams is params in a form protocol.DecodeParams takes: over the
// wire ServeConn passes the *jsonrpc.Request (which costs no allocation
// to pass as an any, and tells serveOperationCall the transport checked
// its params), whose raw params these are.
func plainParams(params any) any {
	if req, ok := params.(*jsonrpc.Request); ok {
		return json.RawMessage(req.Params)
	}
	return params
}

// named finds the handler the manifest declares as name; a name it does
// not declare is undeclared (Serve checked that handlers and declarations
// match).
func named[V any](m map[string]V, what, name string) (V, error) {
	v, ok := m[name]
	if !ok {
		var zero V
		return zero, protocol.Errorf(protocol.CodeUndeclared, "%s %q is not declared", what, name)
	}
	return v, nil
}

// operationEntry is an operation's handlers and the kind its manifest
// declares, if it does.
type operationEntry struct {
	op       Operation
	kind     string
	declared bool
}

func operation(s *server, name, kind string) (Operation, error) {
	e, ok := s.operations[name]
	if !ok {
		return Operation{}, protocol.Errorf(protocol.CodeUndeclared, "%s %q is not declared", "operation", name)
	}
	if e.declared && e.kind != kind {
		return e.op, protocol.Errorf(protocol.CodeUndeclared, "operation %q is of kind %s, not %s", name, e.kind, kind)
	}
	return e.op, nil
}

func executorCall[P, R any](s *server, ctx context.Context, name, what string, pick func(Executor) Func[P, R], p P) (R, error) {
	x, err := named(s.ext.Executors, "executor", name)
	if err != nil {
		var zero R
		return zero, err
	}
	f := pick(x)
	if f == nil {
		var zero R
		return zero, protocol.Errorf(protocol.CodeUnsupported, "executor %q does not support %s", name, what)
	}
	return f(ctx, s.host, p)
}
