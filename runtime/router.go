package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The dispositions of a routed Event.
const (
	DispositionCreated   = "created"   // a route matched and created Work
	DispositionAttached  = "attached"  // a route matched and attached the Event to open Work
	DispositionUnmatched = "unmatched" // no route of the scope matched
)

// RouteRecord is what routing did with one Event, kept in NamespaceRouting.
type RouteRecord struct {
	EventID     string `json:"event_id"`
	Disposition string `json:"disposition"`
	// Route is the index of the matching route in its scope (-1 if none)
	// and Handler its handler.
	Route   int    `json:"route"`
	Handler string `json:"handler,omitempty"`
	Reason  string `json:"reason,omitempty"`
	WorkID  string `json:"work_id,omitempty"`
	// Woke lists the Waits the Event satisfied.
	Woke []string `json:"woke,omitempty"`
	// DisplayRefused says why the match's display was dropped.
	DisplayRefused string `json:"display_refused,omitempty"`
}

// NamespaceRouting's layout: each Event's RouteRecord under its sequence
// and the cursor after them all, so a routing commit writes at the end of
// the KV b-tree (the newest record and the cursor share its last page)
// rather than at a random place in it, where inserts split and rebalance
// pages. A store routed before this layout keeps its records under their
// Event IDs and its cursor under legacyCursorKey: both are read when the
// new key is absent, and the first commit that writes the new cursor
// drops the old one.
var routingCursorKey = keyJoin("routed", "through")

const legacyCursorKey = "cursor"

// routeRecordKey is the key of the RouteRecord of the Event at seq: fixed
// width, so byte order is sequence order, and below routingCursorKey.
func routeRecordKey(seq int64) string { return keyJoin("routed", fmt.Sprintf("%020d", seq)) }

func legacyRouteRecordKey(eventID string) string { return keyJoin("route", eventID) }

// routingCursor is the routing cursor as a transaction read it.
type routingCursor struct {
	at     int64
	legacy bool // read from legacyCursorKey: the next write drops that key
}

// readCursor reads the routing cursor (0 before the first routing).
func (e *Engine) readCursor(r ReadTx) (routingCursor, error) {
	var c routingCursor
	found, err := kvGetJSON(r, NamespaceRouting, routingCursorKey, &c.at)
	if err != nil || found {
		if found {
			e.cursorCurrent.Store(true)
		}
		return c, err
	}
	c.legacy, err = kvGetJSON(r, NamespaceRouting, legacyCursorKey, &c.at)
	if err == nil && !c.legacy {
		e.cursorCurrent.Store(true) // no cursor yet: the first is written under the new key
	}
	return c, err
}

// maxRouteRetries bounds how often one Event's routing is decided again
// after revision conflicts before the pass gives up (and retries later).
const maxRouteRetries = 8

// RoutingCursor is the sequence of the last routed Event.
func (e *Engine) RoutingCursor(ctx context.Context) (int64, error) {
	var c routingCursor
	err := e.store.View(ctx, func(r ReadTx) error {
		var err error
		c, err = e.readCursor(r)
		return err
	})
	return c.at, err
}

// RouteRecordOf reads the route record of an Event; ErrNotFound if it has
// not been routed.
func (e *Engine) RouteRecordOf(ctx context.Context, eventID string) (RouteRecord, error) {
	var rec RouteRecord
	err := e.store.View(ctx, func(r ReadTx) error {
		ev, err := r.Event(eventID)
		if isNotFound(err) {
			return fmt.Errorf("%w: event %q has no route record", ErrNotFound, eventID)
		}
		if err != nil {
			return err
		}
		found, err := kvGetJSON(r, NamespaceRouting, routeRecordKey(ev.Sequence), &rec)
		if err == nil && !found {
			found, err = kvGetJSON(r, NamespaceRouting, legacyRouteRecordKey(eventID), &rec)
		}
		if err == nil && !found {
			err = fmt.Errorf("%w: event %q has no route record", ErrNotFound, eventID)
		}
		return err
	})
	return rec, err
}

// RoutePending routes the Events after the routing cursor, in sequence
// order, and returns how many it routed. Handlers run outside any
// transaction on a detached snapshot; their decisions for up to
// RouteBatch Events then apply in one transaction. An Event whose
// snapshot went stale (a Work it names changed since) is decided again.
// A handler error ends the pass with that Event still pending; routing is
// retried.
func (e *Engine) RoutePending(ctx context.Context) (int, error) {
	if e.routedThroughCommitted() {
		return 0, nil
	}
	var (
		cursor int64
		events []Event
	)
	err := e.store.View(ctx, func(r ReadTx) error {
		c, err := e.readCursor(r)
		if err != nil {
			return err
		}
		cursor = c.at
		events, err = r.Events(cursor, DefaultPageLimit)
		return err
	})
	if err != nil {
		return 0, err
	}
	// Once the page is routed the cursor is at least its last Event's
	// sequence (the cursor's, for an empty page): what routedTail says.
	tail := cursor + 1
	if n := len(events); n > 0 {
		tail = events[n-1].Sequence + 1
	}
	routed, reruns := 0, 0
	for len(events) > 0 {
		var (
			batch     []decision
			decideErr error
		)
		for _, ev := range events[:min(len(events), RouteBatch)] {
			d, err := e.decideEvent(ctx, ev)
			if err != nil {
				decideErr = fmt.Errorf("event %s: %w", ev.ID, err)
				break
			}
			batch = append(batch, d)
		}
		applied := 0
		if len(batch) > 0 {
			err := e.store.Transact(ctx, func(tx Tx) error {
				applied = 0
				cursor, err := e.readCursor(tx)
				if err != nil {
					return err
				}
				for _, d := range batch {
					err := e.applyRoute(tx, d, &cursor)
					if errors.Is(err, errRerun) {
						break // what applied so far commits; the rest is decided again
					}
					if err != nil {
						return fmt.Errorf("event %s: %w", d.ev.ID, err)
					}
					applied++
				}
				return nil
			})
			if err != nil {
				return routed, err
			}
		}
		routed += applied
		if applied > 0 {
			e.Kick()
		}
		if decideErr != nil && applied == len(batch) {
			return routed, decideErr
		}
		if applied == 0 {
			if reruns++; reruns > maxRouteRetries {
				return routed, fmt.Errorf("event %s: %w %d times", events[0].ID, errRerun, reruns)
			}
		} else {
			reruns = 0
		}
		events = events[applied:]
	}
	e.routedTail.Store(tail)
	return routed, nil
}

// routedThroughCommitted reports, without a read, that every committed
// Event is routed: this engine committed the routing cursor at or past
// routedTail-1, the cursor only moves forward, and the store vouches
// that no commit of it accepted an Event past that one.
func (e *Engine) routedThroughCommitted() bool {
	cs, ok := e.store.(CommittedSequenceStore)
	tail := e.routedTail.Load()
	if !ok || tail <= 0 {
		return false
	}
	seq, known := cs.CommittedSequence()
	return known && seq == tail-1
}

// RouteBatch is the most Events one routing transaction applies.
const RouteBatch = 64

// snapshot is what a routing decision was made on.
type snapshot struct {
	// work is the first Work the Event names (works) that is in the
	// Event's own scope, if any. A Work of another scope is never offered
	// to a handler, whatever the Event names or the store links.
	work *Work
}

// decision is one Event's routing verdict, to apply.
type decision struct {
	ev     Event
	snap   snapshot
	routes []Route // the scope's routes as decided on
	idx    int     // the matching route in routes, -1 if none
	dec    RouteDecision
}

var errRerun = errors.New("routing input changed; decided again")

func (e *Engine) decideEvent(ctx context.Context, ev Event) (decision, error) {
	snap, err := e.takeSnapshot(ctx, ev)
	if err != nil {
		return decision{}, err
	}
	c := e.conf()
	idx, dec, err := e.decide(ctx, c, ev, snap)
	return decision{ev: ev, snap: snap, routes: c.Routes[ev.ScopeID], idx: idx, dec: dec}, err
}

func (e *Engine) takeSnapshot(ctx context.Context, ev Event) (snapshot, error) {
	var snap snapshot
	if len(ev.Works) == 0 {
		return snap, nil
	}
	err := e.store.View(ctx, func(r ReadTx) error {
		for _, id := range ev.Works {
			w, err := r.Work(id)
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return err
			}
			if w.ScopeID == ev.ScopeID {
				snap.work = &w
				return nil
			}
		}
		return nil
	})
	return snap, err
}

// decide offers ev to its scope's routes in order and returns the first
// match (index -1 if none; its Reason then joins the routes' reasons).
func (e *Engine) decide(ctx context.Context, c *engineConf, ev Event, snap snapshot) (int, RouteDecision, error) {
	var reasons []string
	for i, route := range c.Routes[ev.ScopeID] {
		dec, err := e.match(ctx, c, ev, snap, route)
		if err != nil {
			return -1, RouteDecision{}, fmt.Errorf("route %d (%s): %w", i, route.Handler, err)
		}
		if dec.Match {
			return i, dec, nil
		}
		if dec.Reason != "" {
			reasons = append(reasons, dec.Reason)
		}
	}
	return -1, RouteDecision{Reason: strings.Join(reasons, "; ")}, nil
}

func (e *Engine) match(ctx context.Context, c *engineConf, ev Event, snap snapshot, route Route) (RouteDecision, error) {
	in := RouteInput{ScopeID: ev.ScopeID, Route: route, Event: ev}
	if snap.work != nil {
		w := *snap.work
		w.CorrelationKeys = slices.Clone(w.CorrelationKeys)
		w.Grants = slices.Clone(w.Grants)
		in.Work = &w
	}
	return c.Handlers[route.Handler].Match(ctx, in)
}

// applyRoute applies d in tx, whose routing cursor is *cursor (read once
// by the caller in tx, and kept here: only applyRoute moves it).
func (e *Engine) applyRoute(tx Tx, d decision, cursor *routingCursor) error {
	ev, snap, idx, dec := d.ev, d.snap, d.idx, d.dec
	if cursor.at >= ev.Sequence {
		return nil // another pass routed it
	}
	if snap.work != nil {
		// The handler saw this Work; if it changed since, decide again.
		// This comes before any write, so the transaction may still
		// commit the Events applied before this one.
		w, err := tx.Work(snap.work.ID)
		if err != nil && !isNotFound(err) {
			return err
		}
		if err != nil || w.Revision != snap.work.Revision {
			return errRerun
		}
	}
	rec := RouteRecord{EventID: ev.ID, Disposition: DispositionUnmatched, Route: -1}
	if idx >= 0 {
		route := d.routes[idx]
		rec.Route, rec.Handler, rec.Reason = idx, route.Handler, dec.Reason
		if err := e.applyMatch(tx, ev, snap, route, dec, &rec); err != nil {
			return err
		}
	} else if len(d.routes) == 0 {
		rec.Reason = "no routes configured for the scope"
	} else {
		rec.Reason = dec.Reason
	}
	b := KVBatch{Puts: []KVPut{
		kvPut(NamespaceRouting, routeRecordKey(ev.Sequence), rec),
		kvPut(NamespaceRouting, routingCursorKey, ev.Sequence),
	}}
	if cursor.legacy {
		b.Deletes = []KVKey{{Namespace: NamespaceRouting, Key: legacyCursorKey}}
	}
	err := tx.KVCommit(b)
	if err == nil {
		*cursor = routingCursor{at: ev.Sequence}
	}
	return err
}

func (e *Engine) applyMatch(tx Tx, ev Event, snap snapshot, route Route, dec RouteDecision, rec *RouteRecord) error {
	keys := normaliseSet(dec.CorrelationKeys)
	if err := ValidateNames("correlation key", keys); err != nil {
		return fmt.Errorf("route %d (%s) decision: %w", rec.Route, route.Handler, err)
	}
	var display json.RawMessage
	if dec.Display != nil {
		if err := ValidateDisplay(*dec.Display); err != nil {
			rec.DisplayRefused = err.Error()
		} else {
			display, _ = json.Marshal(dec.Display)
		}
	}

	// Wake the active Waits on the Event's keys.
	woken := map[string]bool{}
	var wokenWork string
	for _, key := range keys {
		waits, err := tx.WaitsForKey(key)
		if err != nil {
			return err
		}
		for _, w := range waits {
			if woken[w.ID] {
				continue
			}
			// Only a Wait of the Event's own scope: an Event never wakes,
			// and so never attaches to, Work of another scope.
			if inScope, err := workInScope(tx, w.WorkID, ev.ScopeID); err != nil {
				return err
			} else if !inScope {
				continue
			}
			if f := e.conf().filters[w.Owner]; f != nil {
				ok, err := f.Matches(w, ev)
				if err != nil || !ok {
					continue // a failing filter is no match; a later Event may still wake it
				}
			}
			woken[w.ID] = true
			if err := e.wake(tx, w, ev); err != nil {
				return err
			}
			if wokenWork == "" {
				wokenWork = w.WorkID
			}
			rec.Woke = append(rec.Woke, w.ID)
		}
	}

	// Attach to open Work holding one of the keys, else create Work.
	work, found, err := e.openWorkByKeys(tx, ev.ScopeID, keys)
	if err != nil {
		return err
	}
	if !found && wokenWork != "" {
		// Input that woke a Wait goes to its Work, which takes the
		// match's display, rather than starting Work of its own.
		if work, err = tx.Work(wokenWork); err != nil {
			return err
		}
		found = true
	}
	if found {
		rec.Disposition, rec.WorkID = DispositionAttached, work.ID
		if err := tx.LinkEventWork(ev.ID, work.ID); err != nil {
			return err
		}
		changed := false
		if display != nil {
			work.Display, changed = display, true
		}
		if work.State == WorkWaiting {
			if _, err := tx.ActiveWait(work.ID); isNotFound(err) {
				work.State, changed = WorkPending, true // idle standing Work takes new input
			} else if err != nil {
				return err
			}
		}
		if changed {
			if _, err := tx.PutWork(work); err != nil {
				return err
			}
		}
		return nil
	}
	kind := route.Kind
	if dec.Kind != "" {
		kind = dec.Kind
	}
	w := Work{
		ID:              workIDFor(ev.ID),
		ScopeID:         ev.ScopeID,
		Kind:            kind,
		Binding:         route.Binding,
		State:           WorkPending,
		CorrelationKeys: keys,
		Display:         display,
		Context:         dec.Context,
		Grants:          normaliseSet(dec.Grants),
	}
	if _, err := tx.PutWork(w); err != nil {
		return fmt.Errorf("create work: %w", err)
	}
	rec.Disposition, rec.WorkID = DispositionCreated, w.ID
	return tx.LinkEventWork(ev.ID, w.ID)
}

// workInScope reports whether the Work id exists in scope scopeID.
func workInScope(r ReadTx, id, scopeID string) (bool, error) {
	w, err := r.Work(id)
	if isNotFound(err) {
		return false, nil
	}
	return err == nil && w.ScopeID == scopeID, err
}

// openWorkByKeys finds the open (not terminal) Work of the scope holding
// one of keys, trying keys in order.
func (e *Engine) openWorkByKeys(r ReadTx, scopeID string, keys []string) (Work, bool, error) {
	for _, key := range keys {
		after := ""
		for {
			ws, err := r.Works(WorkFilter{ScopeID: scopeID, CorrelationKey: key, After: after, Limit: MaxPageLimit})
			if err != nil {
				return Work{}, false, err
			}
			for _, w := range ws {
				if !w.State.Terminal() {
					return w, true, nil
				}
			}
			if len(ws) < MaxPageLimit {
				break
			}
			after = ws[len(ws)-1].ID
		}
	}
	return Work{}, false, nil
}

// workIDFor names the Work an Event creates: a function of the Event, so a
// re-run of the same routing names the same Work.
func workIDFor(eventID string) string {
	sum := sha256.Sum256([]byte(eventID))
	return "wk_" + hex.EncodeToString(sum[:16])
}

// RouteTraceStep is one route's answer in a trace.
type RouteTraceStep struct {
	Route    int
	Handler  string
	Decision RouteDecision
	Err      error
	// Chosen marks the first matching route: the one routing would take.
	Chosen         bool
	DisplayRefused string
}

// RouteTrace asks every route of the scope how it would decide a
// hypothetical Event, and writes nothing.
func (e *Engine) RouteTrace(ctx context.Context, scopeID string, ev Event) ([]RouteTraceStep, error) {
	ev.ScopeID = scopeID
	snap, err := e.takeSnapshot(ctx, ev)
	if err != nil {
		return nil, err
	}
	var steps []RouteTraceStep
	chosen := false
	c := e.conf()
	for i, route := range c.Routes[scopeID] {
		dec, err := e.match(ctx, c, ev, snap, route)
		st := RouteTraceStep{Route: i, Handler: route.Handler, Decision: dec, Err: err}
		if err == nil && dec.Match && !chosen {
			st.Chosen, chosen = true, true
		}
		if err == nil && dec.Display != nil {
			if verr := ValidateDisplay(*dec.Display); verr != nil {
				st.DisplayRefused = verr.Error()
			}
		}
		steps = append(steps, st)
	}
	return steps, nil
}
