package host

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// Ingress is one source the extension registered in configure, of the
// ingress type typ, as an IngressSource. What the extension returns is
// checked as its own writes are: the source, a family of the source, the
// source's scope and the current payload schema; a page or delivery with
// anything else is refused whole.
func (r *Remote) Ingress(src protocol.SourceDecl, typ, entryID string) runtime.IngressSource {
	return remoteIngress{r: r, src: src, typ: typ, entry: entryID}
}

// checkWorks refuses works naming a Work the extension may not see, by
// its service's rule (Service.namedWorks), for the drafts the host accepts
// outside the service: an ingress source's push and reconcile answers.
// Without a service nothing can be seen.
func (r *Remote) checkWorks(ctx context.Context, works []string) error {
	if len(works) == 0 {
		return nil
	}
	svc := r.conn.Service()
	if svc == nil {
		return fmt.Errorf("%w: work %q not found", runtime.ErrNotFound, works[0])
	}
	g := svc.generation()
	return protocolToRuntime(svc.view(ctx, func(tx runtime.ReadTx) error { return svc.namedWorks(tx, g, works) }))
}

type remoteIngress struct {
	r     *Remote
	src   protocol.SourceDecl
	typ   string
	entry string
}

// envelope checks one draft and turns it into an envelope of the source.
func (in remoteIngress) envelope(ctx context.Context, i int, d protocol.EventDraft) (runtime.Envelope, error) {
	m := in.r.conn.Manifest()
	scope := d.ScopeID
	if scope == "" {
		scope = in.src.ScopeID
	}
	switch {
	case d.Source != "" && d.Source != in.src.Name:
		return runtime.Envelope{}, fmt.Errorf("%w: event %d names source %q, not %q", runtime.ErrUnauthorized, i, d.Source, in.src.Name)
	case !slices.Contains(in.src.Families, d.Family):
		return runtime.Envelope{}, fmt.Errorf("%w: event %d: family %q is not one of source %q", runtime.ErrUnauthorized, i, d.Family, in.src.Name)
	case in.src.ScopeID != "" && scope != in.src.ScopeID:
		return runtime.Envelope{}, fmt.Errorf("%w: event %d: source %q delivers into scope %q only", runtime.ErrUnauthorized, i, in.src.Name, in.src.ScopeID)
	}
	if err := m.CheckWrite(d.Schema); err != nil {
		return runtime.Envelope{}, fmt.Errorf("%w: event %d: %w", runtime.ErrInvalid, i, err)
	}
	if err := in.r.checkWorks(ctx, d.Works); err != nil {
		return runtime.Envelope{}, fmt.Errorf("event %d: %w", i, err)
	}
	return runtime.Envelope{Source: in.src.Name, DeliveryID: d.DeliveryID, ScopeID: scope, Family: d.Family,
		Type: d.Type, Schema: d.Schema, Payload: d.Payload, Works: d.Works, OccurredAt: d.OccurredAt}, nil
}

func (in remoteIngress) Push(ctx context.Context, d runtime.Delivery) ([]runtime.Envelope, error) {
	var res protocol.IngressPushResult
	err := in.r.conn.Call(ctx, "ingress.push", protocol.IngressPushParams{Type: in.typ, Source: in.src.Name,
		ScopeID: in.src.ScopeID, EntryID: in.entry,
		Delivery: protocol.Delivery{ID: d.ID, Headers: d.Headers, Body: d.Body, ReceivedAt: d.ReceivedAt}}, &res)
	if err != nil {
		return nil, protocolToRuntime(err)
	}
	out := make([]runtime.Envelope, 0, len(res.Events))
	for i, draft := range res.Events {
		env, err := in.envelope(ctx, i, draft)
		if err != nil {
			return nil, err
		}
		out = append(out, env)
	}
	return out, nil
}

func (in remoteIngress) Reconcile(ctx context.Context, req runtime.ReconcileRequest) (runtime.ReconcilePage, error) {
	var res protocol.IngressReconcileResult
	scope := req.ScopeID
	if scope == "" {
		scope = in.src.ScopeID
	}
	err := in.r.conn.Call(ctx, "ingress.reconcile", protocol.IngressReconcileParams{Type: in.typ, Source: in.src.Name,
		ScopeID: scope, EntryID: in.entry, Cursor: req.Cursor, MaxItems: req.Limit}, &res)
	if err != nil {
		// A partial scan infers nothing: the runtime retries the generation.
		return runtime.ReconcilePage{}, protocolToRuntime(err)
	}
	page := runtime.ReconcilePage{Next: res.Next, Complete: res.Complete}
	for i, o := range res.Observations {
		env, err := in.envelope(ctx, i, o.Event)
		if err != nil {
			return runtime.ReconcilePage{}, err
		}
		page.Observations = append(page.Observations, runtime.Observation{Item: o.Item, Version: o.Version, Envelope: env})
	}
	return page, nil
}

// Samples offers the route handler's named sample Events for a trace.
func (h remoteRoute) Samples(ctx context.Context, scopeID string, route runtime.Route, now time.Time) ([]runtime.RouteSample, error) {
	var res protocol.RouteSamplesResult
	if err := h.r.conn.Call(ctx, "route.samples", protocol.RouteSamplesParams{Handler: h.handler, ScopeID: scopeID,
		Config: route.Config, RouteID: route.Name, Now: now}, &res); err != nil {
		return nil, protocolToRuntime(err)
	}
	out := make([]runtime.RouteSample, 0, len(res.Samples))
	for _, s := range res.Samples {
		out = append(out, runtime.RouteSample{ID: s.ID, Title: s.Title, Event: runtime.Envelope{
			Source: s.Event.Source, DeliveryID: s.Event.DeliveryID, ScopeID: scopeID, Family: s.Event.Family,
			Type: s.Event.Type, Schema: s.Event.Schema, Payload: s.Event.Payload, Works: s.Event.Works,
			OccurredAt: s.Event.OccurredAt}})
	}
	return out, nil
}

var _ runtime.RouteSampler = remoteRoute{}
