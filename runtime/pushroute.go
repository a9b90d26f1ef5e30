package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// A push's routing, decided before its acceptance and applied in the
// transaction that accepts it, so push → route → Work is one commit.
//
// The route handlers are still called outside any transaction, on a
// detached snapshot, as RoutePending calls them; what changes is that
// they are shown the Events as the store will accept them (identity,
// sequence, acceptance time known in advance) before the commit. The
// transaction then applies the decisions only if nothing they rest on
// moved: no Event was waiting for routing (routing stays in sequence
// order), each Event is new and exactly the one decided on, and each
// snapshot's Work is unchanged (as in RoutePending). Otherwise, or when
// a handler fails or is slow, the push is accepted alone and its Events
// are routed by the next pass, as before: the routing of a push never
// fails or delays its acceptance past PushRouteTimeout.

// PushRouteTimeout bounds the routing decided for a push before it is
// accepted; past it the push is accepted unrouted (real time: it bounds
// the handlers' work).
var PushRouteTimeout = 250 * time.Millisecond

// preRoute is a push's routing as decided before acceptance.
type preRoute struct {
	latest    int64     // the log's last sequence, every Event up to it routed
	at        time.Time // the acceptance time the Events were decided with
	events    []Event   // as they will be accepted
	decisions []decision
}

// errPushRoute ends an accepting transaction whose routing failed to
// apply, so the push is accepted again without it.
var errPushRoute = errors.New("routing in the accepting transaction failed")

// decideBeforeAccept decides the routing of a push's envelopes, or
// returns nil when it cannot be applied with their acceptance.
func (e *Engine) decideBeforeAccept(ctx context.Context, envs []Envelope) *preRoute {
	ps, ok := e.store.(PreAcceptStore)
	if !ok || len(envs) == 0 {
		return nil
	}
	// After a push this engine routed, the log ends where that push left
	// it unless another writer came between, which the store's committed
	// sequence tells when it knows it, and the accepting transaction
	// sees in any case; otherwise one read says where it ends.
	latest := e.routedTail.Load() - 1
	if cs, ok := e.store.(CommittedSequenceStore); ok && latest >= 0 {
		if seq, known := cs.CommittedSequence(); known && seq != latest {
			latest = -1
		}
	}
	if latest < 0 {
		var cursor routingCursor
		err := e.store.View(ctx, func(r ReadTx) error {
			var err error
			if latest, err = r.LatestSequence(); err != nil {
				return err
			}
			cursor, err = e.readCursor(r)
			return err
		})
		if err != nil || cursor.at != latest {
			return nil // Events are waiting for routing, and go first
		}
	}
	p := &preRoute{latest: latest, at: fromStoreTime(ps.Now())}
	dctx, cancel := context.WithTimeout(ctx, PushRouteTimeout)
	defer cancel()
	for i, env := range envs {
		ev, err := eventAsAccepted(env, latest+1+int64(i), p.at)
		if err != nil {
			return nil // acceptance refuses it, and says why
		}
		d, err := e.decideEvent(dctx, ev)
		if err != nil || dctx.Err() != nil {
			return nil // the routing pass retries it and reports a failure
		}
		p.events, p.decisions = append(p.events, ev), append(p.decisions, d)
	}
	return p
}

// fromStoreTime is t as a store keeps it: nanoseconds, UTC.
func fromStoreTime(t time.Time) time.Time { return time.Unix(0, t.UnixNano()).UTC() }

// eventAsAccepted is the Event a store makes of a new root envelope
// accepted at sequence seq and time at.
func eventAsAccepted(env Envelope, seq int64, at time.Time) (Event, error) {
	sig, err := ValidateEnvelope(env)
	if err != nil {
		return Event{}, err
	}
	if env.Parent != "" {
		return Event{}, fmt.Errorf("%w: not a root envelope", ErrInvalid)
	}
	ev := Event{Envelope: env, Sequence: seq, Signature: sig, AcceptedAt: at}
	if ev.ID == "" {
		ev.ID = DefaultEventID(env.Source, env.DeliveryID)
	}
	ev.Root = ev.ID
	ev.Works = normaliseSet(env.Works)
	ev.Payload = bytes.Clone(env.Payload)
	if !env.OccurredAt.IsZero() {
		ev.OccurredAt = env.OccurredAt.UTC()
	}
	return ev, nil
}

// sameEvent reports whether a and b agree on everything a route handler
// is shown.
func sameEvent(a, b Event) bool {
	return a.ID == b.ID && a.Sequence == b.Sequence && a.Source == b.Source && a.DeliveryID == b.DeliveryID &&
		a.ScopeID == b.ScopeID && a.Family == b.Family && a.Type == b.Type && a.Schema == b.Schema &&
		bytes.Equal(a.Payload, b.Payload) && a.Parent == b.Parent && a.Root == b.Root && a.Depth == b.Depth &&
		slices.Equal(a.Works, b.Works) && a.OccurredAt.Equal(b.OccurredAt) && a.AcceptedAt.Equal(b.AcceptedAt) &&
		a.Signature == b.Signature
}

// latestSequence is the log's last sequence as tx sees it: the store's
// committed sequence when it vouches for it (exact in a write
// transaction, which no other commit of the store can overlap), else
// read.
func (e *Engine) latestSequence(tx Tx) (int64, error) {
	if cs, ok := e.store.(CommittedSequenceStore); ok {
		if seq, known := cs.CommittedSequence(); known {
			return seq, nil
		}
	}
	return tx.LatestSequence()
}

// acceptRouted accepts envs in one transaction and, when p still holds
// in it, applies p's routing in the same transaction. It reports how
// many of the Events it routed.
func (e *Engine) acceptRouted(ctx context.Context, envs []Envelope, p *preRoute) ([]Event, int, error) {
	var (
		out    []Event
		routed int
	)
	err := e.store.Transact(ctx, func(tx Tx) error {
		out, routed = out[:0], 0
		ptx, ok := tx.(PreAcceptTx)
		if !ok {
			return errPushRoute
		}
		latest, err := e.latestSequence(tx)
		if err != nil {
			return err
		}
		// The cursor is at least p.latest (this engine committed it there,
		// or read it there, and it only moves forward) and at most the
		// log's end: so it is p.latest when the log still ends there,
		// and needs reading only to find a legacy key to drop.
		cursor := routingCursor{at: p.latest}
		if !e.cursorCurrent.Load() {
			if cursor, err = e.readCursor(tx); err != nil {
				return err
			}
		}
		routable := latest == p.latest && cursor.at == p.latest
		for i, env := range envs {
			var (
				ev    Event
				added bool
				err   error
			)
			if routable {
				ev, added, err = ptx.AcceptEventAt(env, p.at)
			} else {
				ev, _, err = tx.AcceptEvent(env)
			}
			if err != nil {
				return fmt.Errorf("envelope %d (%s/%s): %w", i, env.Source, env.DeliveryID, err)
			}
			out = append(out, ev)
			routable = routable && added && sameEvent(ev, p.events[i])
		}
		if !routable {
			return nil
		}
		for _, d := range p.decisions {
			err := e.applyRoute(tx, d, &cursor)
			if errors.Is(err, errRerun) {
				break // written nothing for it; the pass decides it again
			}
			if err != nil {
				return fmt.Errorf("%w: event %s: %w", errPushRoute, d.ev.ID, err)
			}
			routed++
		}
		return nil
	})
	if err == nil && routed == len(envs) {
		e.routedTail.Store(out[len(out)-1].Sequence + 1)
	} else {
		e.routedTail.Store(0) // the next push reads where the log ends
	}
	if errors.Is(err, errPushRoute) {
		// Nothing committed: accept alone; the pass routes (and reports).
		out, err = e.acceptOnly(ctx, envs)
		return out, 0, err
	}
	return out, routed, err
}
