package host

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// Remote presents a running package through the runtime's contracts. The
// payload schema gate applies before each call that decides on an Event's
// payload, so an unreadable payload never depends on what the process
// does with it.
type Remote struct {
	conn Conn
	// SchemaSkips counts the answers the host gave for the extension
	// because a payload was not readable by it.
	schemaSkips atomic.Int64
}

// NewRemote wraps conn.
func NewRemote(conn Conn) *Remote { return &Remote{conn: conn} }

// SchemaSkips is how many answers the schema gate gave so far.
func (r *Remote) SchemaSkips() int64 { return r.schemaSkips.Load() }

func (r *Remote) readable(ev runtime.Event) bool {
	if protocol.Readable(r.conn.Manifest().PayloadStatus(ev.Schema)) {
		return true
	}
	r.schemaSkips.Add(1)
	return false
}

// RouteHandler is the extension's route handler handler.
func (r *Remote) RouteHandler(handler string) runtime.RouteHandler {
	return remoteRoute{r: r, handler: handler}
}

type remoteRoute struct {
	r       *Remote
	handler string
}

func (h remoteRoute) Match(ctx context.Context, in runtime.RouteInput) (runtime.RouteDecision, error) {
	if !h.r.readable(in.Event) {
		return runtime.RouteDecision{Reason: "the payload schema is not readable by this release"}, nil
	}
	p := protocol.RouteMatchParams{Handler: h.handler, ScopeID: in.ScopeID, RouteID: in.Route.Name,
		Config: in.Route.Config, Event: wireEvent(in.Event)}
	if in.Work != nil {
		w := wireWork(*in.Work)
		p.Work = &w
	}
	var res protocol.RouteMatchResult
	if err := h.r.conn.Call(ctx, "route.match", p, &res); err != nil {
		return runtime.RouteDecision{}, protocolToRuntime(err)
	}
	d := runtime.RouteDecision{Match: res.Match, Reason: res.Reason, Kind: res.Kind,
		CorrelationKeys: res.CorrelationKeys, Context: res.Context, Grants: res.Grants}
	if res.Display != nil {
		var disp runtime.Display
		b, _ := json.Marshal(res.Display)
		if err := json.Unmarshal(b, &disp); err != nil {
			return runtime.RouteDecision{}, fmt.Errorf("%w: route.match display: %v", runtime.ErrInvalid, err)
		}
		d.Display = &disp
	}
	return d, nil
}

// WorkKind is the policy of the extension's Work kind.
func (r *Remote) WorkKind(kind string) runtime.WorkKindPolicy {
	for _, k := range r.conn.Manifest().Provides.WorkKinds {
		if k.Name == kind {
			return remoteWorkKind{r: r, decl: k}
		}
	}
	return remoteWorkKind{r: r, decl: protocol.WorkKindDecl{Name: kind}}
}

type remoteWorkKind struct {
	r    *Remote
	decl protocol.WorkKindDecl
}

func (k remoteWorkKind) Standing() bool { return k.decl.Standing }

// Trigger asks the extension inside the start transaction; any failure
// falls back to the first input, so it never fails the transaction.
func (k remoteWorkKind) Trigger(inputs []runtime.Event) (int, error) {
	if !k.decl.Trigger || len(inputs) == 0 {
		return 0, nil
	}
	p := protocol.WorkKindTriggerParams{Kind: k.decl.Name}
	for _, ev := range inputs {
		p.Inputs = append(p.Inputs, wireEvent(ev))
	}
	var res protocol.WorkKindTriggerResult
	if err := k.r.conn.CallInTx(context.Background(), "work_kind.trigger", p, &res); err != nil {
		return 0, nil
	}
	for i, ev := range inputs {
		if ev.ID == res.Trigger {
			return i, nil
		}
	}
	return 0, nil
}

// Recurrence is the extension's recurrence kind.
func (r *Remote) Recurrence(kind string) runtime.Recurrence {
	return remoteRecurrence{r: r, kind: kind}
}

type remoteRecurrence struct {
	r    *Remote
	kind string
}

// Next asks the extension inside the fire transaction, with the timer as
// the extension armed it; an error aborts the fire (retryable). The next
// occurrence's payload must be at the current version of one of the
// extension's schemas.
func (rc remoteRecurrence) Next(fired runtime.Timer, now time.Time) (runtime.Occurrence, error) {
	var res protocol.RecurrenceNextResult
	err := rc.r.conn.CallInTx(context.Background(), "recurrence.next", protocol.RecurrenceNextParams{
		Recurrence: rc.kind, Timer: wireTimer(rc.r.conn.Service().timerPrefix(), fired), Now: now}, &res)
	if err != nil {
		return runtime.Occurrence{}, protocolToRuntime(err)
	}
	if err := rc.r.conn.Manifest().CheckWrite(res.Schema); err != nil {
		return runtime.Occurrence{}, fmt.Errorf("%w: recurrence.next: %w", runtime.ErrInvalid, err)
	}
	return runtime.Occurrence{Due: res.Next, Payload: res.Payload}, nil
}

// DependencyFilter is the filter of the extension's wait operation.
func (r *Remote) DependencyFilter(operation string) runtime.DependencyFilter {
	return remoteFilter{r: r, op: operation}
}

type remoteFilter struct {
	r  *Remote
	op string
}

// Matches counts a failure, and an unreadable payload, as no match.
func (f remoteFilter) Matches(w runtime.Wait, ev runtime.Event) (bool, error) {
	if !f.r.readable(ev) {
		return false, nil
	}
	var res protocol.DependencyFilterResult
	err := f.r.conn.CallInTx(context.Background(), "dependency.filter", protocol.DependencyFilterParams{Operation: f.op,
		Wait: protocol.Wait{ID: w.ID, WorkID: w.WorkID, Keys: w.Keys, Target: w.Target, Description: w.Description,
			Progress: w.Progress, State: string(w.State), Deadline: w.Deadline, CreatedAt: w.CreatedAt},
		Event: wireEvent(ev)}, &res)
	if err != nil {
		return false, nil
	}
	return res.Match, nil
}

// Task runs the extension's background passes.
func (r *Remote) Task() runtime.Task { return remoteTask{r} }

type remoteTask struct{ r *Remote }

func (t remoteTask) Run(ctx context.Context, name string) error {
	_, err := t.r.RunTask(ctx, name, time.Now())
	return err
}

// Check runs the extension's doctor checks, applying the rule for an
// answer without status: ok gives ok, its absence warn with
// extension_check_failed; an unknown status is warn with
// extension_check_invalid.
func (r *Remote) Check() runtime.Check { return remoteCheck{r} }

type remoteCheck struct{ r *Remote }

func (c remoteCheck) Run(ctx context.Context, name string, deep bool) (runtime.CheckResult, error) {
	return c.r.RunCheck(ctx, protocol.CheckRunParams{Check: name, Deep: deep})
}
