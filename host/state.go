package host

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// State reads see only the extension's configured scopes and the Work of
// its own kinds anywhere. A record outside them reads as not_found and a
// page outside them as empty, so a read reveals nothing of what the
// extension may not see.

func (s *Service) ownKind(kind string) bool {
	for _, k := range s.cfg.Manifest.Provides.WorkKinds {
		if k.Name == kind {
			return true
		}
	}
	return false
}

func (s *Service) workVisible(g generation, w runtime.Work) bool {
	return g.scopes[w.ScopeID] || s.ownKind(w.Kind)
}

// eventVisible: an Event of a configured scope, or one with no scope
// recorded yet.
func eventVisible(g generation, ev runtime.Event) bool {
	return ev.ScopeID == "" || g.scopes[ev.ScopeID]
}

func (s *Service) notVisible(what, id string) error {
	s.logf("read of %s %q outside its scopes answered not_found", what, id)
	return protocol.Errorf(protocol.CodeNotFound, "%s %q not found", what, id)
}

// workNotFound is the one answer for a Work that does not exist or that
// the extension may not see, whether it reads or names it.
func workNotFound(id string) error {
	return protocol.Errorf(protocol.CodeNotFound, "work %q not found", id)
}

func (s *Service) view(ctx context.Context, fn func(runtime.ReadTx) error) error {
	st, err := s.store()
	if err != nil {
		return err
	}
	return st.View(ctx, fn)
}

// visibleWork reads a Work the extension may see.
func (s *Service) visibleWork(tx runtime.ReadTx, g generation, id string) (runtime.Work, error) {
	w, err := tx.Work(id)
	if errors.Is(err, runtime.ErrNotFound) || err == nil && !s.workVisible(g, w) {
		s.logf("read of work %q outside its scopes answered not_found", id)
		return runtime.Work{}, workNotFound(id)
	}
	return w, err
}

func (s *Service) stateWork(ctx context.Context, p protocol.IDParams) (protocol.WorkResult, error) {
	var out protocol.WorkResult
	g := s.generation()
	err := s.view(ctx, func(tx runtime.ReadTx) error {
		w, err := s.visibleWork(tx, g, p.ID)
		out.Work = wireWork(w)
		return err
	})
	return out, err
}

func (s *Service) stateWorks(ctx context.Context, p protocol.WorksParams) (protocol.WorksResult, error) {
	out := protocol.WorksResult{Works: []protocol.Work{}}
	g := s.generation()
	limit := clampLimit(p.Limit)
	err := s.view(ctx, func(tx runtime.ReadTx) error {
		after := p.After
		// Filter before the limit: page through the store until the page
		// is full or the store has no more.
		for {
			ws, err := tx.Works(runtime.WorkFilter{ScopeID: p.ScopeID, Kind: p.Kind, State: runtime.WorkState(p.State),
				CorrelationKey: p.CorrelationKey, After: after, Limit: runtime.MaxPageLimit})
			if err != nil {
				return err
			}
			for _, w := range ws {
				if s.workVisible(g, w) {
					out.Works = append(out.Works, wireWork(w))
					if len(out.Works) == limit {
						out.Next = w.ID
						return nil
					}
				}
			}
			if len(ws) < runtime.MaxPageLimit {
				return nil
			}
			after = ws[len(ws)-1].ID
		}
	})
	return out, err
}

func (s *Service) stateExecutions(ctx context.Context, p protocol.WorkIDParams) (protocol.ExecutionsResult, error) {
	out := protocol.ExecutionsResult{Executions: []protocol.Execution{}}
	g := s.generation()
	err := s.view(ctx, func(tx runtime.ReadTx) error {
		if _, err := s.visibleWork(tx, g, p.WorkID); err != nil {
			return err
		}
		xs, err := tx.Executions(p.WorkID)
		for _, x := range xs {
			out.Executions = append(out.Executions, protocol.Execution{ID: x.ID, WorkID: x.WorkID, Attempt: x.Attempt,
				Executor: x.Executor, State: string(x.State), Error: x.Error, StartedAt: x.StartedAt, EndedAt: x.EndedAt})
		}
		return err
	})
	return out, err
}

func (s *Service) stateWaits(ctx context.Context, p protocol.WorkIDParams) (protocol.WaitsResult, error) {
	out := protocol.WaitsResult{Waits: []protocol.Wait{}}
	g := s.generation()
	err := s.view(ctx, func(tx runtime.ReadTx) error {
		if _, err := s.visibleWork(tx, g, p.WorkID); err != nil {
			return err
		}
		ws, err := tx.Waits(p.WorkID)
		for _, w := range ws {
			out.Waits = append(out.Waits, protocol.Wait{ID: w.ID, WorkID: w.WorkID, Keys: w.Keys, Target: w.Target,
				Description: w.Description, Progress: w.Progress, State: string(w.State), Deadline: w.Deadline,
				CreatedAt: w.CreatedAt, ResolvedAt: w.ResolvedAt})
		}
		return err
	})
	return out, err
}

func (s *Service) stateEvent(ctx context.Context, p protocol.IDParams) (protocol.EventResult, error) {
	var out protocol.EventResult
	g := s.generation()
	err := s.view(ctx, func(tx runtime.ReadTx) error {
		ev, err := tx.Event(p.ID)
		if errors.Is(err, runtime.ErrNotFound) || err == nil && !eventVisible(g, ev) {
			return s.notVisible("event", p.ID)
		}
		out.Event = wireEvent(ev)
		return err
	})
	return out, err
}

// stateEvents merges the extension's scopes' indexes (and the Events with
// no scope yet), so a page costs the extension's own Events.
func (s *Service) stateEvents(ctx context.Context, p protocol.EventsParams) (protocol.EventsResult, error) {
	out := protocol.EventsResult{Events: []protocol.Event{}}
	g := s.generation()
	var scopes []string
	if p.ScopeID != "" {
		if !g.scopes[p.ScopeID] {
			s.logf("read of the events of scope %q outside its scopes answered empty", p.ScopeID)
			return out, nil
		}
		scopes = []string{p.ScopeID}
	} else {
		scopes = append(scopes, "")
		for id := range g.scopes {
			scopes = append(scopes, id)
		}
	}
	limit := clampLimit(p.Limit)
	err := s.view(ctx, func(tx runtime.ReadTx) error {
		var all []runtime.Event
		for _, id := range scopes {
			evs, err := tx.ScopeEvents(id, p.After, limit)
			if err != nil {
				return err
			}
			all = append(all, evs...)
		}
		sort.Slice(all, func(i, j int) bool { return all[i].Sequence < all[j].Sequence })
		for _, ev := range all[:min(limit, len(all))] {
			out.Events = append(out.Events, wireEvent(ev))
		}
		return nil
	})
	return out, err
}

func (s *Service) stateWorkEvents(ctx context.Context, p protocol.WorkEventsParams) (protocol.EventsResult, error) {
	out := protocol.EventsResult{Events: []protocol.Event{}}
	g := s.generation()
	limit := clampLimit(p.Limit)
	err := s.view(ctx, func(tx runtime.ReadTx) error {
		w, err := tx.Work(p.ID)
		if errors.Is(err, runtime.ErrNotFound) || err == nil && !s.workVisible(g, w) {
			return nil // an empty page, never not_found
		}
		if err != nil {
			return err
		}
		after := p.After
		for {
			evs, err := tx.WorkEvents(p.ID, after, runtime.MaxPageLimit)
			if err != nil {
				return err
			}
			for _, ev := range evs {
				if eventVisible(g, ev) {
					out.Events = append(out.Events, wireEvent(ev))
					if len(out.Events) == limit {
						return nil
					}
				}
			}
			if len(evs) < runtime.MaxPageLimit {
				return nil
			}
			after = evs[len(evs)-1].Sequence
		}
	})
	return out, err
}

func (s *Service) stateScope(ctx context.Context, p protocol.IDParams) (protocol.ScopeResult, error) {
	var out protocol.ScopeResult
	g := s.generation()
	if !g.scopes[p.ID] {
		return out, s.notVisible("scope", p.ID)
	}
	err := s.view(ctx, func(tx runtime.ReadTx) error {
		sc, err := tx.Scope(p.ID)
		out.Scope = wireScope(sc)
		return err
	})
	return out, err
}

func (s *Service) stateScopes(ctx context.Context, _ protocol.Empty) (protocol.ScopesResult, error) {
	out := protocol.ScopesResult{Scopes: []protocol.Scope{}}
	g := s.generation()
	err := s.view(ctx, func(tx runtime.ReadTx) error {
		scs, err := tx.Scopes()
		for _, sc := range scs {
			if g.scopes[sc.ID] {
				out.Scopes = append(out.Scopes, wireScope(sc))
			}
		}
		return err
	})
	return out, err
}

func (s *Service) stateSequence(ctx context.Context, _ protocol.Empty) (protocol.SequenceResult, error) {
	var out protocol.SequenceResult
	err := s.view(ctx, func(tx runtime.ReadTx) error {
		seq, err := tx.LatestSequence()
		out.Sequence = seq
		return err
	})
	return out, err
}

// timerPrefix starts the key of every timer the extension arms.
func (s *Service) timerPrefix() string { return s.name + ":" }

// farFuture is later than any timer (and within the nanosecond range).
var farFuture = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)

func (s *Service) stateTimers(ctx context.Context, p protocol.TimersParams) (protocol.TimersResult, error) {
	out := protocol.TimersResult{Timers: []protocol.Timer{}}
	g := s.generation()
	err := s.view(ctx, func(tx runtime.ReadTx) error {
		ts, err := tx.DueTimers(farFuture, runtime.MaxPageLimit)
		for _, t := range ts {
			if !strings.HasPrefix(t.Key, s.timerPrefix()) || !g.scopes[t.ScopeID] && t.ScopeID != "" {
				continue
			}
			if p.ScopeID != "" && t.ScopeID != p.ScopeID || p.Kind != "" && t.Kind != p.Kind {
				continue
			}
			out.Timers = append(out.Timers, wireTimer(s.timerPrefix(), t))
		}
		return err
	})
	return out, err
}

// ---- conversions ----

func wireEvent(ev runtime.Event) protocol.Event {
	return protocol.Event{ID: ev.ID, Sequence: ev.Sequence, ScopeID: ev.ScopeID, Source: ev.Source,
		DeliveryID: ev.DeliveryID, Family: ev.Family, Type: ev.Type, Schema: ev.Schema, Payload: ev.Payload,
		Parent: ev.Parent, Root: ev.Root, Depth: ev.Depth, Works: ev.Works, OccurredAt: ev.OccurredAt,
		AcceptedAt: ev.AcceptedAt}
}

func wireWork(w runtime.Work) protocol.Work {
	return protocol.Work{ID: w.ID, ScopeID: w.ScopeID, Kind: w.Kind, Binding: w.Binding, State: string(w.State),
		CorrelationKeys: w.CorrelationKeys, Display: w.Display, Context: w.Context, Grants: w.Grants,
		Revision: w.Revision, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
}

func wireScope(sc runtime.Scope) protocol.Scope {
	return protocol.Scope{ID: sc.ID, Name: sc.Name, Config: dropSecretRefs(sc.Config)}
}

func wireTimer(prefix string, t runtime.Timer) protocol.Timer {
	return protocol.Timer{Key: strings.TrimPrefix(t.Key, prefix), ScopeID: t.ScopeID, WorkID: t.WorkID, Kind: t.Kind,
		Due: t.Due, Recurrence: t.Recurrence, Payload: t.Payload}
}

// dropSecretRefs removes every secret_refs member from a config document,
// so a scope read never carries reference text.
func dropSecretRefs(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			delete(x, "secret_refs")
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	out, err := json.Marshal(walk(v))
	if err != nil {
		return nil
	}
	return out
}
