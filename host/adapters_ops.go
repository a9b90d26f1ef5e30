package host

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// Operations registers the extension's toolbelt operations: each with its
// owner (the extension's emission authority in its configured scopes)
// and, for a wait operation declared with dependency_filter, its filter.
// A handler operation is a runtime.Operation; a wait operation also a
// runtime.WaitOperation; an emit operation also a runtime.EmitOperation,
// with an in-transaction emit.commit when declared with commit.
func (r *Remote) Operations() map[string]runtime.OperationSpec {
	m := r.conn.Manifest()
	var scopes []string
	if svc := r.conn.Service(); svc != nil {
		scopes = svc.Scopes()
	}
	owner := emitterOf(m, scopes)
	out := map[string]runtime.OperationSpec{}
	for _, o := range m.Provides.Operations {
		spec := runtime.OperationSpec{Owner: owner}
		base := remoteOp{r: r, decl: o}
		switch o.Kind {
		case protocol.OperationKindWait:
			spec.Operation = remoteWaitOp{base}
			if o.DependencyFilter {
				spec.Filter = r.DependencyFilter(o.Name)
			}
		case protocol.OperationKindEmit:
			spec.Operation = remoteEmitOp{base}
		default:
			spec.Operation = base
		}
		out[o.Name] = spec
	}
	return out
}

type remoteOp struct {
	r    *Remote
	decl protocol.OperationDecl
}

func wireAuthority(a runtime.Authority) protocol.Authority {
	return protocol.Authority{ScopeID: a.ScopeID, WorkID: a.WorkID, ExecutionID: a.ExecutionID, Connection: a.Connection}
}

// Handle calls a handler operation. The handler must be idempotent on the
// call's request id: a retry carries the same id.
func (o remoteOp) Handle(ctx context.Context, call runtime.Call) (json.RawMessage, error) {
	if o.decl.Kind != protocol.OperationKindHandler {
		return nil, fmt.Errorf("%w: %s is a %s operation", runtime.ErrUnsupported, o.decl.Name, o.decl.Kind)
	}
	var res protocol.OperationCallResult
	err := o.r.conn.Call(ctx, "operation.call", protocol.OperationCallParams{Operation: o.decl.Name,
		RequestID: call.RequestID, Input: call.Input, Authority: wireAuthority(call.Authority)}, &res)
	if err != nil {
		return nil, protocolToRuntime(err)
	}
	return res.Output, nil
}

type remoteWaitOp struct{ remoteOp }

// PlanWait asks the extension for the Wait the call declares.
func (o remoteWaitOp) PlanWait(ctx context.Context, call runtime.Call) (runtime.WaitRequest, json.RawMessage, error) {
	var res protocol.OperationWaitResult
	err := o.r.conn.Call(ctx, "operation.wait", protocol.OperationWaitParams{Operation: o.decl.Name,
		RequestID: call.RequestID, Input: call.Input, Authority: wireAuthority(call.Authority)}, &res)
	if err != nil {
		return runtime.WaitRequest{}, nil, protocolToRuntime(err)
	}
	req := runtime.WaitRequest{Keys: res.Wait.Keys, Target: res.Wait.Target, Description: res.Wait.Description}
	if !res.Wait.Deadline.IsZero() {
		req.Timeout = max(time.Until(res.Wait.Deadline), time.Millisecond)
	}
	return req, res.Output, nil
}

type remoteEmitOp struct{ remoteOp }

// PlanEmit asks the extension for the Event the call emits, checked as
// the extension's own writes are, and the in-transaction commit of its
// records when the operation declares one.
func (o remoteEmitOp) PlanEmit(ctx context.Context, call runtime.Call) (runtime.EmitPlan, error) {
	var res protocol.OperationEmitResult
	err := o.r.conn.Call(ctx, "operation.emit", protocol.OperationEmitParams{Operation: o.decl.Name,
		RequestID: call.RequestID, Input: call.Input, Authority: wireAuthority(call.Authority)}, &res)
	if err != nil {
		return runtime.EmitPlan{}, protocolToRuntime(err)
	}
	m := o.r.conn.Manifest()
	d := res.Event
	switch {
	case !protocol.SourceNamespace(m.Name, d.Source):
		return runtime.EmitPlan{}, fmt.Errorf("%w: source %q is not in the source namespace of %s", runtime.ErrUnauthorized, d.Source, m.Name)
	case !declaredFamilies(m)[d.Family]:
		return runtime.EmitPlan{}, fmt.Errorf("%w: family %q is not declared by %s", runtime.ErrUnauthorized, d.Family, m.Name)
	}
	if err := m.CheckWrite(d.Schema); err != nil {
		return runtime.EmitPlan{}, fmt.Errorf("%w: %w", runtime.ErrInvalid, err)
	}
	scope := d.ScopeID
	if scope == "" {
		scope = call.Authority.ScopeID
	}
	plan := runtime.EmitPlan{Result: res.Output, Emissions: []runtime.Emission{{Source: d.Source, DeliveryID: d.DeliveryID,
		ScopeID: scope, Family: d.Family, Type: d.Type, Schema: d.Schema, Payload: d.Payload, Works: d.Works,
		OccurredAt: d.OccurredAt}}}
	if o.decl.Commit {
		plan.Commit = remoteCommit{op: o.remoteOp, requestID: call.RequestID, commit: res.Commit}
	}
	return plan, nil
}

type remoteCommit struct {
	op        remoteOp
	requestID string
	commit    json.RawMessage
}

// Commit asks, inside the emission transaction, for the records that join
// the accepted Event. A timeout or crash aborts the transaction
// (retryable); records outside the extension's namespaces are refused.
func (c remoteCommit) Commit(outcomes []runtime.EmissionOutcome) (runtime.KVBatch, error) {
	if len(outcomes) == 0 || outcomes[0].Refused != nil {
		return runtime.KVBatch{}, nil
	}
	var res protocol.EmitCommitResult
	err := c.op.r.conn.CallInTx(context.Background(), "emit.commit", protocol.EmitCommitParams{Operation: c.op.decl.Name,
		RequestID: c.requestID, Event: wireEvent(outcomes[0].Event), Commit: c.commit}, &res)
	if err != nil {
		return runtime.KVBatch{}, protocolToRuntime(err)
	}
	name := c.op.r.conn.Manifest().Name
	var b runtime.KVBatch
	for _, p := range res.Puts {
		if !protocol.Namespace(name, p.Namespace) {
			return runtime.KVBatch{}, fmt.Errorf("%w: emit.commit wrote namespace %q", runtime.ErrUnauthorized, p.Namespace)
		}
		b.Puts = append(b.Puts, runtime.KVPut{Namespace: p.Namespace, Key: p.Key, Value: p.Value})
	}
	for _, d := range res.Deletes {
		if !protocol.Namespace(name, d.Namespace) {
			return runtime.KVBatch{}, fmt.Errorf("%w: emit.commit deleted in namespace %q", runtime.ErrUnauthorized, d.Namespace)
		}
		b.Deletes = append(b.Deletes, runtime.KVKey{Namespace: d.Namespace, Key: d.Key})
	}
	return b, nil
}
