package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/open-conduit/open-conduit/protocol"
)

// CheckExtensionEmissions checks the Events an extension emits through the
// host: kv.commit emissions accepted with the batch's writes in one
// transaction and named by protocol.EmittedEventID, the same identity
// again being the same Event, derivation through event.accept, and the
// checks (declared family, own source, current schema, configured scope,
// a parent of the same scope) refusing a whole batch so nothing of it
// applies, while an emission over its chain's causal bound is refused
// alone and the rest commits.
//
// The Work an Event names (works) must be one the extension may see, as
// state.work does (its scopes, its kinds): any other is refused exactly as
// a Work that does not exist, on kv.commit, event.accept and
// ingress.deliver alike. When the driver routes (Routes), routing offers a
// handler only Work of the Event's own scope.
func CheckExtensionEmissions(ctx context.Context, d ExtensionHostDriver) error {
	return checkAll(ctx, emissionSuite(d))
}

// RunExtensionEmissions runs CheckExtensionEmissions's checks as named
// subtests.
func RunExtensionEmissions(t *testing.T, d ExtensionHostDriver) {
	t.Helper()
	runAll(t, emissionSuite(d))
}

// emissionSuite binds the emission checks to d; the routing checks are
// skipped for a driver that does not route.
func emissionSuite(d ExtensionHostDriver) []namedCheck {
	checks := extSuite(d, emissionChecks)
	for _, c := range extSuite(d, emissionRoutingChecks) {
		if !d.Routes {
			c.skip = "the driver does not route (ExtensionHostDriver.Routes)"
		}
		checks = append(checks, c)
	}
	return checks
}

var emissionChecks = []extCheck{
	{"root_with_records", checkEmitRoot},
	{"same_identity_same_event", checkEmitAgain},
	{"derived_in_parents_scope", checkEmitDerived},
	{"event_accept_only_derives", checkEventAccept},
	{"undeclared_family_applies_nothing", checkEmitRefused(func(e *protocol.Emission) { e.Family = extAlpha + ".other" }, nil)},
	{"foreign_source_applies_nothing", checkEmitRefused(func(e *protocol.Emission) { e.Source = extBeta + "/in" }, nil)},
	{"stale_schema_applies_nothing", checkEmitRefused(func(e *protocol.Emission) { e.Schema = extAlpha + ".note.v7" }, protocol.ErrUnreadableSchema)},
	{"foreign_schema_applies_nothing", checkEmitRefused(func(e *protocol.Emission) { e.Schema = extBeta + ".note.v1" }, protocol.ErrUnreadableSchema)},
	{"unconfigured_scope_applies_nothing", checkEmitRefused(func(e *protocol.Emission) { e.ScopeID = scopeB }, nil)},
	{"parent_in_another_scope_applies_nothing", checkEmitForeignParent},
	{"causal_limit_refuses_alone", checkEmitCausalLimit},
	{"foreign_work_in_emission_answers_as_missing", checkForeignWorkAnswersAsMissing(emitNaming)},
	{"foreign_work_in_event_accept_answers_as_missing", checkForeignWorkAnswersAsMissing(acceptNaming)},
	{"foreign_work_in_ingress_delivery_answers_as_missing", checkForeignWorkAnswersAsMissing(deliverNaming)},
}

// emissionRoutingChecks need a driver that routes.
var emissionRoutingChecks = []extCheck{
	{"routing_offers_only_the_events_scope", checkRoutingOffersOnlyTheEventsScope},
}

// rootEmission is a valid root Emission of alpha in scope-a.
func rootEmission(delivery string) protocol.Emission {
	return protocol.Emission{Source: extAlpha + "/in", DeliveryID: delivery, ScopeID: scopeA,
		Family: extAlpha + ".note", Type: "created", Schema: extAlpha + ".note.v1",
		Payload: json.RawMessage(`{"text":"hello"}`)}
}

func derivedEmission(delivery, parent string) protocol.Emission {
	e := rootEmission(delivery)
	e.ScopeID, e.Parent = "", parent
	return e
}

func oneOutcome(r protocol.KVCommitResult) (protocol.EmissionOutcome, error) {
	if len(r.Accepted) != 1 {
		return protocol.EmissionOutcome{}, fmt.Errorf("%d outcomes for one emission", len(r.Accepted))
	}
	o := r.Accepted[0]
	if o.Refused != "" || o.Event == nil {
		return o, fmt.Errorf("the emission was refused (%s)", o.Refused)
	}
	return o, nil
}

func emitRoot(ctx context.Context, h ExtensionHost, delivery string) (protocol.Event, error) {
	r, err := extCommit(ctx, h, protocol.KVCommitParams{Emissions: []protocol.Emission{rootEmission(delivery)}})
	if err != nil {
		return protocol.Event{}, err
	}
	o, err := oneOutcome(r)
	if err != nil {
		return protocol.Event{}, err
	}
	return *o.Event, nil
}

func checkEmitRoot(ctx context.Context, h map[string]ExtensionHost) error {
	a := h[extAlpha]
	e := rootEmission("d1")
	id := protocol.EmittedEventID(e.Source, e.DeliveryID)
	// The batch's own record names the Event before it exists.
	r, err := extCommit(ctx, a, protocol.KVCommitParams{Emissions: []protocol.Emission{e},
		Puts: []protocol.KVPut{extPut(extAlpha, "note/d1", fmt.Sprintf("%q", id))}})
	if err != nil {
		return err
	}
	o, err := oneOutcome(r)
	if err != nil {
		return err
	}
	ev := *o.Event
	var errs []error
	if !o.Added {
		errs = append(errs, errors.New("a new Event reported added=false"))
	}
	if ev.ID != id {
		errs = append(errs, fmt.Errorf("the Event is %q, want EmittedEventID %q", ev.ID, id))
	}
	if ev.Root != ev.ID || ev.Depth != 0 || ev.Parent != "" || ev.ScopeID != scopeA || ev.Sequence <= 0 {
		errs = append(errs, fmt.Errorf("a root Event reads as %+v", ev))
	}
	var got protocol.EventResult
	if err := a.Call(ctx, "state.event", protocol.IDParams{ID: id}, &got); err != nil {
		errs = append(errs, fmt.Errorf("reading the emitted Event: %w", err))
	} else if got.Event.Family != e.Family || !sameJSON(got.Event.Payload, e.Payload) {
		errs = append(errs, fmt.Errorf("the stored Event is %+v", got.Event))
	}
	errs = append(errs, wantValue(ctx, a, extAlpha, "note/d1", fmt.Sprintf("%q", id)))
	return errors.Join(errs...)
}

func checkEmitAgain(ctx context.Context, h map[string]ExtensionHost) error {
	a := h[extAlpha]
	first, err := emitRoot(ctx, a, "again")
	if err != nil {
		return err
	}
	r, err := extCommit(ctx, a, protocol.KVCommitParams{Emissions: []protocol.Emission{rootEmission("again")}})
	if err != nil {
		return fmt.Errorf("emitting the same Event again: %w", err)
	}
	o, err := oneOutcome(r)
	if err != nil {
		return err
	}
	if o.Added || o.Event.ID != first.ID || o.Event.Sequence != first.Sequence {
		return fmt.Errorf("the same identity again gave %+v (added %v), want the stored %s", o.Event, o.Added, first.ID)
	}
	// The same identity with other content is a conflict.
	changed := rootEmission("again")
	changed.Payload = json.RawMessage(`{"text":"changed"}`)
	if _, err := extCommit(ctx, a, protocol.KVCommitParams{Emissions: []protocol.Emission{changed}}); !errors.Is(err, protocol.ErrConflict) {
		return fmt.Errorf("the same identity with other content: got %v, want conflict", err)
	}
	return nil
}

func checkEmitDerived(ctx context.Context, h map[string]ExtensionHost) error {
	a := h[extAlpha]
	root, err := emitRoot(ctx, a, "parent")
	if err != nil {
		return err
	}
	r, err := extCommit(ctx, a, protocol.KVCommitParams{Emissions: []protocol.Emission{derivedEmission("child", root.ID)}})
	if err != nil {
		return err
	}
	o, err := oneOutcome(r)
	if err != nil {
		return err
	}
	if ev := o.Event; ev.Parent != root.ID || ev.Root != root.ID || ev.Depth != 1 || ev.ScopeID != scopeA {
		return fmt.Errorf("a derived Event reads as %+v", ev)
	}
	return nil
}

func checkEventAccept(ctx context.Context, h map[string]ExtensionHost) error {
	a := h[extAlpha]
	root, err := emitRoot(ctx, a, "ea-root")
	if err != nil {
		return err
	}
	e := rootEmission("ea-child")
	var res protocol.EventAcceptResult
	err = a.Call(ctx, "event.accept", protocol.EventAcceptParams{Source: e.Source, DeliveryID: e.DeliveryID,
		Family: e.Family, Schema: e.Schema, Payload: e.Payload, Parent: root.ID,
		Puts: []protocol.KVPut{extPut(extAlpha, "ea", `1`)}}, &res)
	if err != nil {
		return fmt.Errorf("event.accept: %w", err)
	}
	var errs []error
	if !res.Added || res.Event.Parent != root.ID || res.Event.Depth != 1 {
		errs = append(errs, fmt.Errorf("event.accept gave %+v (added %v)", res.Event, res.Added))
	}
	errs = append(errs, wantValue(ctx, a, extAlpha, "ea", `1`))
	// Without a parent it would be a root: refused, nothing applied.
	err = a.Call(ctx, "event.accept", protocol.EventAcceptParams{Source: e.Source, DeliveryID: "ea-root-2",
		Family: e.Family, Schema: e.Schema, Payload: e.Payload, Puts: []protocol.KVPut{extPut(extAlpha, "ea2", `1`)}}, &res)
	if err == nil {
		errs = append(errs, errors.New("event.accept without a parent accepted a root Event"))
	}
	errs = append(errs, wantValue(ctx, a, extAlpha, "ea2", ""))
	return errors.Join(errs...)
}

// checkEmitRefused: a batch with one good and one spoiled emission and a
// put is refused whole.
func checkEmitRefused(spoil func(*protocol.Emission), want error) func(context.Context, map[string]ExtensionHost) error {
	return func(ctx context.Context, h map[string]ExtensionHost) error {
		a := h[extAlpha]
		good, bad := rootEmission("good"), rootEmission("bad")
		spoil(&bad)
		_, err := extCommit(ctx, a, protocol.KVCommitParams{Emissions: []protocol.Emission{good, bad},
			Puts: []protocol.KVPut{extPut(extAlpha, "refused", `1`)}})
		var errs []error
		switch {
		case err == nil:
			errs = append(errs, fmt.Errorf("a spoiled emission %+v was accepted", bad))
		case want != nil && !errors.Is(err, want):
			errs = append(errs, fmt.Errorf("refused with %v, want %v", err, want))
		}
		errs = append(errs, wantValue(ctx, a, extAlpha, "refused", ""))
		var got protocol.EventResult
		if err := a.Call(ctx, "state.event", protocol.IDParams{ID: protocol.EmittedEventID(good.Source, good.DeliveryID)}, &got); err == nil {
			errs = append(errs, errors.New("the good emission of a refused batch was accepted"))
		}
		return errors.Join(errs...)
	}
}

func checkEmitForeignParent(ctx context.Context, h map[string]ExtensionHost) error {
	a, b := h[extAlpha], h[extBeta]
	be := rootEmission("beta-root")
	be.Source, be.ScopeID, be.Family, be.Schema = extBeta+"/in", scopeB, extBeta+".note", extBeta+".note.v1"
	r, err := extCommit(ctx, b, protocol.KVCommitParams{Emissions: []protocol.Emission{be}})
	if err != nil {
		return fmt.Errorf("%s emitting its own root: %w", extBeta, err)
	}
	o, err := oneOutcome(r)
	if err != nil {
		return err
	}
	_, err = extCommit(ctx, a, protocol.KVCommitParams{Emissions: []protocol.Emission{derivedEmission("stolen", o.Event.ID)},
		Puts: []protocol.KVPut{extPut(extAlpha, "stolen", `1`)}})
	if err == nil {
		return fmt.Errorf("%s derived from %s's Event in another scope", extAlpha, extBeta)
	}
	return wantValue(ctx, a, extAlpha, "stolen", "")
}

// maxChainProbe bounds how deep the causal check builds a chain looking
// for the bound.
const maxChainProbe = 256

func checkEmitCausalLimit(ctx context.Context, h map[string]ExtensionHost) error {
	a := h[extAlpha]
	root, err := emitRoot(ctx, a, "chain-0")
	if err != nil {
		return err
	}
	parent := root.ID
	for i := 1; i <= maxChainProbe; i++ {
		over := derivedEmission(fmt.Sprintf("chain-%d", i), parent)
		fresh := rootEmission(fmt.Sprintf("fresh-%d", i))
		r, err := extCommit(ctx, a, protocol.KVCommitParams{Emissions: []protocol.Emission{over, fresh},
			Puts: []protocol.KVPut{extPut(extAlpha, "chain", fmt.Sprint(i))}})
		if err != nil {
			return fmt.Errorf("depth %d: %w", i, err)
		}
		if len(r.Accepted) != 2 {
			return fmt.Errorf("depth %d: %d outcomes for two emissions", i, len(r.Accepted))
		}
		if r.Accepted[0].Refused == "" {
			if r.Accepted[0].Event == nil {
				return fmt.Errorf("depth %d: no Event and no refusal", i)
			}
			parent = r.Accepted[0].Event.ID
			continue
		}
		var errs []error
		if r.Accepted[0].Refused != protocol.CodeCausalLimit || r.Accepted[0].Event != nil {
			errs = append(errs, fmt.Errorf("depth %d: refused as %q, want causal_limit alone", i, r.Accepted[0].Refused))
		}
		if r.Accepted[1].Refused != "" || r.Accepted[1].Event == nil || !r.Accepted[1].Added {
			errs = append(errs, fmt.Errorf("depth %d: the other emission of the batch did not commit: %+v", i, r.Accepted[1]))
		}
		errs = append(errs, wantValue(ctx, a, extAlpha, "chain", fmt.Sprint(i)))
		var got protocol.EventResult
		if err := a.Call(ctx, "state.event", protocol.IDParams{ID: protocol.EmittedEventID(over.Source, over.DeliveryID)}, &got); err == nil {
			errs = append(errs, fmt.Errorf("depth %d: the refused emission was stored", i))
		}
		return errors.Join(errs...)
	}
	return fmt.Errorf("a chain of %d derived Events met no causal bound", maxChainProbe)
}
