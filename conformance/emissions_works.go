package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// The Work an Event names (works) is scoped like a state read: an
// extension may name a Work of one of its configured scopes or of one of
// its own kinds, and any other is refused exactly as a Work that does not
// exist, whichever path accepts the draft. Routing offers a handler only
// Work of the Event's own scope, whatever the Event names.

// namingPath is one way an extension hands the host a draft: send sends
// a draft of alpha's in scope-a, of delivery, that names works, with a put
// (alpha/delivery) that applies only with it.
type namingPath struct {
	send func(ctx context.Context, a ExtensionHost, delivery string, works []string) error
}

// emitNaming is kv.commit with one emission naming works (and a good one
// beside it, which must not apply either).
var emitNaming = namingPath{send: func(ctx context.Context, a ExtensionHost, delivery string, works []string) error {
	e := rootEmission(delivery)
	e.Works = works
	_, err := extCommit(ctx, a, protocol.KVCommitParams{Emissions: []protocol.Emission{rootEmission(delivery + "-good"), e},
		Puts: []protocol.KVPut{extPut(extAlpha, delivery, `1`)}})
	return err
}}

// acceptNaming is event.accept deriving from a root of alpha's.
var acceptNaming = namingPath{send: func(ctx context.Context, a ExtensionHost, delivery string, works []string) error {
	root, err := emitRoot(ctx, a, delivery+"-root")
	if err != nil {
		return fmt.Errorf("emitting the parent: %w", err)
	}
	e := rootEmission(delivery)
	return a.Call(ctx, "event.accept", protocol.EventAcceptParams{Source: e.Source, DeliveryID: delivery,
		Family: e.Family, Schema: e.Schema, Payload: e.Payload, Parent: root.ID, Works: works,
		Puts: []protocol.KVPut{extPut(extAlpha, delivery, `1`)}}, nil)
}}

// deliverNaming is ingress.deliver on alpha's source, a good Event beside
// the one naming works.
var deliverNaming = namingPath{send: func(ctx context.Context, a ExtensionHost, delivery string, works []string) error {
	e := rootEmission(delivery)
	draft := func(d string, works []string) protocol.EventDraft {
		return protocol.EventDraft{DeliveryID: d, Family: e.Family, Type: e.Type, Schema: e.Schema, Payload: e.Payload, Works: works}
	}
	return a.Call(ctx, "ingress.deliver", protocol.IngressDeliverParams{Source: extAlpha + "/in",
		Events: []protocol.EventDraft{draft(delivery+"-good", nil), draft(delivery, works)}}, nil)
}}

// fixtureVisible checks that the driver seeded the suites' Work: each
// extension reads its own.
func fixtureVisible(ctx context.Context, h map[string]ExtensionHost) error {
	for owner, id := range map[string]string{extAlpha: workAlpha, extBeta: workBeta} {
		var r protocol.WorkResult
		if err := h[owner].Call(ctx, "state.work", protocol.IDParams{ID: id}, &r); err != nil {
			return fmt.Errorf("%s cannot read its own Work %s (did the driver seed the specs' Works?): %w", owner, id, err)
		}
	}
	return nil
}

// stored reports whether alpha reads an Event of its source and delivery
// in scope-a, whichever way it was accepted (and so named).
func stored(ctx context.Context, a ExtensionHost, delivery string) (bool, error) {
	var after int64
	for range maxChainProbe {
		var page protocol.EventsResult
		if err := a.Call(ctx, "state.events", protocol.EventsParams{ScopeID: scopeA, After: after}, &page); err != nil {
			return false, err
		}
		for _, ev := range page.Events {
			if ev.Source == extAlpha+"/in" && ev.DeliveryID == delivery {
				return true, nil
			}
			after = ev.Sequence
		}
		if len(page.Events) == 0 {
			return false, nil
		}
	}
	return false, fmt.Errorf("state.events did not end in %d pages", maxChainProbe)
}

// checkForeignWorkAnswersAsMissing: through p, a draft naming beta's Work
// (another scope, another kind) and one naming a Work that does not exist
// are both refused with the same code and message (but for the ID), and
// neither applies anything; a draft naming alpha's own Work is accepted.
func checkForeignWorkAnswersAsMissing(p namingPath) func(context.Context, map[string]ExtensionHost) error {
	return func(ctx context.Context, h map[string]ExtensionHost) error {
		if err := fixtureVisible(ctx, h); err != nil {
			return err
		}
		a := h[extAlpha]
		var errs []error
		answers := map[string]string{}
		for _, id := range []string{workBeta, "wk-nowhere"} {
			delivery := "naming-" + id
			err := p.send(ctx, a, delivery, []string{workAlpha, id})
			if err == nil {
				errs = append(errs, fmt.Errorf("a draft naming %s was accepted", id))
				continue
			}
			answers[id] = fmt.Sprintf("%s: %s", protocol.CodeOf(err), strings.ReplaceAll(err.Error(), id, "<id>"))
			errs = append(errs, wantValue(ctx, a, extAlpha, delivery, ""))
			for _, d := range []string{delivery, delivery + "-good"} {
				if ok, err := stored(ctx, a, d); err != nil || ok {
					errs = append(errs, fmt.Errorf("the refused call naming %s stored Event %s (%v)", id, d, err))
				}
			}
		}
		if len(answers) == 2 && answers[workBeta] != answers["wk-nowhere"] {
			errs = append(errs, fmt.Errorf("a foreign Work is answered %q, a missing one %q: an existence oracle",
				answers[workBeta], answers["wk-nowhere"]))
		}
		if err := p.send(ctx, a, "naming-own", []string{workAlpha}); err != nil {
			errs = append(errs, fmt.Errorf("a draft naming alpha's own Work %s: %w", workAlpha, err))
		} else if ok, err := stored(ctx, a, "naming-own"); err != nil || !ok {
			errs = append(errs, fmt.Errorf("the accepted draft naming %s is not stored (%v)", workAlpha, err))
		}
		return errors.Join(errs...)
	}
}

// offerLog is a route handler that matches every Event, correlating it by
// the keys of the Work it is offered and of alpha's Work elsewhere, and
// records what it was offered.
type offerLog struct {
	mu      sync.Mutex
	offered map[string]*runtime.Work // by Event ID
}

func (l *offerLog) Match(_ context.Context, in runtime.RouteInput) (runtime.RouteDecision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.offered == nil {
		l.offered = map[string]*runtime.Work{}
	}
	l.offered[in.Event.ID] = in.Work
	return runtime.RouteDecision{Match: true, Reason: "the suite takes every Event",
		CorrelationKeys: []string{"key:" + workAlphaElsewhere}}, nil
}

func (l *offerLog) offer(id string) (*runtime.Work, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.offered[id]
	return w, ok
}

// checkRoutingOffersOnlyTheEventsScope: alpha may name its own kind's Work
// in beta's scope (state.work shows it), but routing its Event of scope-a
// offers the handler no Work, and a match on that Work's correlation key
// creates Work in scope-a rather than attaching to it; an Event naming
// alpha's Work of scope-a is offered that Work.
func checkRoutingOffersOnlyTheEventsScope(ctx context.Context, h map[string]ExtensionHost) error {
	if err := fixtureVisible(ctx, h); err != nil {
		return err
	}
	a := h[extAlpha]
	router, ok := a.(ExtensionRouter)
	if !ok {
		return errors.New("the driver sets Routes but its host is no ExtensionRouter")
	}
	var elsewhere protocol.WorkResult
	if err := a.Call(ctx, "state.work", protocol.IDParams{ID: workAlphaElsewhere}, &elsewhere); err != nil {
		return fmt.Errorf("alpha cannot read its own kind's Work in %s: %w", scopeB, err)
	}
	ids := map[string]string{}
	for _, w := range []string{workAlphaElsewhere, workAlpha} {
		e := rootEmission("route-" + w)
		e.Works = []string{w}
		r, err := extCommit(ctx, a, protocol.KVCommitParams{Emissions: []protocol.Emission{e}})
		if err != nil {
			return fmt.Errorf("could not exercise: alpha's Event naming %s was refused: %w", w, err)
		}
		o, err := oneOutcome(r)
		if err != nil {
			return err
		}
		ids[w] = o.Event.ID
	}
	log := &offerLog{}
	recs, err := router.Route(ctx, log)
	if err != nil {
		return fmt.Errorf("routing: %w", err)
	}
	byEvent := map[string]runtime.RouteRecord{}
	for _, rec := range recs {
		byEvent[rec.EventID] = rec
	}
	var errs []error
	foreign, own := ids[workAlphaElsewhere], ids[workAlpha]
	switch w, ok := log.offer(foreign); {
	case !ok:
		errs = append(errs, fmt.Errorf("routing never offered the Event naming %s to the scope's route", workAlphaElsewhere))
	case w != nil:
		errs = append(errs, fmt.Errorf("an Event of %s was offered Work %s of scope %s", scopeA, w.ID, w.ScopeID))
	}
	if rec := byEvent[foreign]; rec.WorkID == workAlphaElsewhere || rec.Disposition != runtime.DispositionCreated {
		errs = append(errs, fmt.Errorf("the Event of %s matching the key of %s was routed %s to %q, want created in its own scope",
			scopeA, workAlphaElsewhere, rec.Disposition, rec.WorkID))
	}
	if w, _ := log.offer(own); w == nil || w.ID != workAlpha {
		errs = append(errs, fmt.Errorf("the Event naming %s of its own scope was offered %v", workAlpha, w))
	}
	var after protocol.WorkResult
	if err := a.Call(ctx, "state.work", protocol.IDParams{ID: workAlphaElsewhere}, &after); err != nil {
		errs = append(errs, err)
	} else if after.Work.Revision != elsewhere.Work.Revision {
		errs = append(errs, fmt.Errorf("routing an Event of %s changed Work %s of %s", scopeA, workAlphaElsewhere, scopeB))
	}
	return errors.Join(errs...)
}
