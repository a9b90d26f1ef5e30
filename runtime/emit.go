package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// EmittedEventID is the ID of an emitted Event: "evt_" and the hex SHA-256
// of len(source) as 8 bytes big-endian, source, len(deliveryID) likewise
// and deliveryID. It depends on the identity alone, so a transaction can
// name the Event before it is accepted and emitting it again names the
// same Event. (It is the wire protocol's algorithm, repeated here because
// this package imports no other.)
func EmittedEventID(source, deliveryID string) string {
	h := sha256.New()
	var n [8]byte
	for _, s := range [...]string{source, deliveryID} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return "evt_" + hex.EncodeToString(h.Sum(nil))
}

// CausalRefusal records an Emission refused for its chain's limits, kept
// in NamespaceCausal for the operator.
type CausalRefusal struct {
	EventID    string    `json:"event_id"`
	Source     string    `json:"source"`
	DeliveryID string    `json:"delivery_id"`
	Root       string    `json:"root"`
	Depth      int       `json:"depth"`
	Reason     string    `json:"reason"`
	At         time.Time `json:"at"`
}

// causalWindow counts a chain's Events in one clock minute.
type causalWindow struct {
	Minute int64 `json:"minute"` // Unix minute
	Count  int   `json:"count"`
}

func causalRateKey(root string) string       { return keyJoin("rate", root) }
func causalRefusalKey(eventID string) string { return keyJoin("refused", eventID) }

// Refusals lists the recorded causal-limit refusals, oldest key first.
func (e *Engine) Refusals(ctx context.Context) ([]CausalRefusal, error) {
	var out []CausalRefusal
	err := e.store.View(ctx, func(r ReadTx) error {
		entries, err := r.KVList(NamespaceCausal, keyJoin("refused", ""), "", MaxPageLimit)
		if err != nil {
			return err
		}
		for _, en := range entries {
			var c CausalRefusal
			if _, err := kvGetJSONValue(en, &c); err != nil {
				return err
			}
			out = append(out, c)
		}
		return nil
	})
	return out, err
}

// Emit accepts an extension's emissions with its KV batch in one
// transaction. The checks come first and a failure applies nothing: an
// undeclared family, a foreign source or namespace, an unconfigured scope,
// a parent outside the scope, a failed precondition. An Emission over its
// chain's causal limits is refused alone (its outcome's Refused wraps
// ErrCausalLimit, and the refusal is recorded); the rest commits. Each
// Event is named EmittedEventID(source, delivery_id), so emitting twice
// is the same Event.
func (e *Engine) Emit(ctx context.Context, em Emitter, batch KVBatch, emissions []Emission) ([]EmissionOutcome, error) {
	return e.EmitWith(ctx, em, batch, emissions, nil)
}

// EmitWith is Emit with commit, when not nil, adding the records that join
// the transaction once it has seen each Emission's outcome (they are
// checked as batch is), as an operation's EmitPlan does: event.accept
// commits its writes only with a newly added Event.
func (e *Engine) EmitWith(ctx context.Context, em Emitter, batch KVBatch, emissions []Emission, commit EmitCommit) ([]EmissionOutcome, error) {
	var out []EmissionOutcome
	err := e.store.Transact(ctx, func(tx Tx) error {
		var err error
		out, err = e.emit(tx, em, batch, emissions, commit)
		return err
	})
	if err != nil {
		return nil, err
	}
	e.Kick()
	return out, nil
}

// emit is Emit inside tx; commit, optional, adds records that see the
// outcomes.
func (e *Engine) emit(tx Tx, em Emitter, batch KVBatch, emissions []Emission, commit EmitCommit) ([]EmissionOutcome, error) {
	if err := e.checkBatch(em, batch); err != nil {
		return nil, err
	}
	envs := make([]Envelope, len(emissions))
	for i, m := range emissions {
		env, err := e.checkEmission(tx, em, m)
		if err != nil {
			return nil, fmt.Errorf("emission %d: %w", i, err)
		}
		envs[i] = env
	}
	out := make([]EmissionOutcome, len(envs))
	now := e.clock.Now().UTC()
	for i, env := range envs {
		ev, added, err := e.acceptCausal(tx, env, now)
		if err != nil {
			return nil, fmt.Errorf("emission %d: %w", i, err)
		}
		out[i] = EmissionOutcome{Event: ev, Added: added}
		if ev.ID == "" {
			out[i].Refused = fmt.Errorf("%w: emission %d (%s/%s)", ErrCausalLimit, i, env.Source, env.DeliveryID)
		}
	}
	if commit != nil {
		more, err := commit.Commit(slices.Clone(out))
		if err != nil {
			return nil, fmt.Errorf("emit commit: %w", err)
		}
		if err := e.checkBatch(em, more); err != nil {
			return nil, fmt.Errorf("emit commit: %w", err)
		}
		batch.Preconditions = append(slices.Clone(batch.Preconditions), more.Preconditions...)
		batch.Puts = append(slices.Clone(batch.Puts), more.Puts...)
		batch.Deletes = append(slices.Clone(batch.Deletes), more.Deletes...)
	}
	if len(batch.Preconditions)+len(batch.Puts)+len(batch.Deletes) > 0 {
		if err := tx.KVCommit(batch); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func ownsNamespace(ext, ns string) bool {
	return ext != "" && (ns == ext || strings.HasPrefix(ns, ext+".") && len(ns) > len(ext)+1)
}

func ownsSource(ext, source string) bool {
	return ext != "" && (source == ext || strings.HasPrefix(source, ext+"/") && len(source) > len(ext)+1)
}

func (e *Engine) checkBatch(em Emitter, b KVBatch) error {
	check := func(ns string) error {
		if !ownsNamespace(em.Name, ns) {
			return fmt.Errorf("%w: namespace %q is not %q's", ErrUnauthorized, ns, em.Name)
		}
		return nil
	}
	for _, p := range b.Preconditions {
		if err := check(p.Namespace); err != nil {
			return err
		}
	}
	for _, p := range b.Puts {
		if err := check(p.Namespace); err != nil {
			return err
		}
	}
	for _, d := range b.Deletes {
		if err := check(d.Namespace); err != nil {
			return err
		}
	}
	return ValidateKVBatch(b)
}

func (e *Engine) checkEmission(r ReadTx, em Emitter, m Emission) (Envelope, error) {
	if !ownsSource(em.Name, m.Source) {
		return Envelope{}, fmt.Errorf("%w: source %q is not %q's", ErrUnauthorized, m.Source, em.Name)
	}
	if !slices.Contains(em.Families, m.Family) {
		return Envelope{}, fmt.Errorf("%w: family %q is not declared by %q", ErrUnauthorized, m.Family, em.Name)
	}
	if !slices.Contains(em.Scopes, m.ScopeID) {
		return Envelope{}, fmt.Errorf("%w: scope %q is not configured for %q", ErrUnauthorized, m.ScopeID, em.Name)
	}
	env := Envelope{
		ID: EmittedEventID(m.Source, m.DeliveryID), Source: m.Source, DeliveryID: m.DeliveryID,
		ScopeID: m.ScopeID, Family: m.Family, Type: m.Type, Schema: m.Schema, Payload: m.Payload,
		Parent: m.Parent, Works: m.Works, OccurredAt: m.OccurredAt,
	}
	if _, err := ValidateEnvelope(env); err != nil {
		return Envelope{}, err
	}
	if err := em.checkWorks(r, m.Works); err != nil {
		return Envelope{}, err
	}
	if m.Parent != "" {
		p, err := r.Event(m.Parent)
		if isNotFound(err) {
			return Envelope{}, fmt.Errorf("%w: parent %q is not an accepted event", ErrInvalid, m.Parent)
		}
		if err != nil {
			return Envelope{}, err
		}
		if p.ScopeID != m.ScopeID {
			return Envelope{}, fmt.Errorf("%w: parent %q is outside scope %q", ErrInvalid, m.Parent, m.ScopeID)
		}
	}
	return env, nil
}

// MaySee reports whether the emitter may name w in an Emission's works: w
// is in one of its scopes or of one of its kinds.
func (em Emitter) MaySee(w Work) bool {
	return slices.Contains(em.Scopes, w.ScopeID) || slices.Contains(em.Kinds, w.Kind)
}

// checkWorks refuses works naming a Work the emitter may not see, with
// the answer of a Work that does not exist, so an Emission is never an
// existence oracle.
func (em Emitter) checkWorks(r ReadTx, works []string) error {
	for _, id := range works {
		w, err := r.Work(id)
		if err != nil && !isNotFound(err) {
			return err
		}
		if err != nil || !em.MaySee(w) {
			return fmt.Errorf("%w: work %q", ErrNotFound, id)
		}
	}
	return nil
}

// acceptCausal accepts env unless it breaks its chain's limits; then it
// records the refusal and returns a zero Event. An identity already
// accepted is returned as it stands, never refused or counted again.
func (e *Engine) acceptCausal(tx Tx, env Envelope, now time.Time) (Event, bool, error) {
	if _, err := tx.EventByDelivery(env.Source, env.DeliveryID); err == nil {
		return tx.AcceptEvent(env)
	} else if !isNotFound(err) {
		return Event{}, false, err
	}
	root, depth := env.ID, 0
	if env.Parent != "" {
		p, err := tx.Event(env.Parent)
		if err != nil {
			return Event{}, false, err
		}
		root, depth = p.Root, p.Depth+1
	}
	minute := now.Unix() / 60
	var win causalWindow
	if _, err := kvGetJSON(tx, NamespaceCausal, causalRateKey(root), &win); err != nil {
		return Event{}, false, err
	}
	if win.Minute != minute {
		win = causalWindow{Minute: minute}
	}
	reason := ""
	switch {
	case depth > e.conf().Causal.MaxDepth:
		reason = fmt.Sprintf("depth %d is over the limit of %d", depth, e.conf().Causal.MaxDepth)
	case win.Count >= e.conf().Causal.PerMinute:
		reason = fmt.Sprintf("chain %s has had %d events this minute, the limit", root, win.Count)
	}
	if reason != "" {
		ref := CausalRefusal{EventID: env.ID, Source: env.Source, DeliveryID: env.DeliveryID, Root: root, Depth: depth, Reason: reason, At: now}
		return Event{}, false, tx.KVCommit(KVBatch{Puts: []KVPut{kvPut(NamespaceCausal, causalRefusalKey(env.ID), ref)}})
	}
	ev, added, err := tx.AcceptEvent(env)
	if err != nil {
		return Event{}, false, err
	}
	win.Count++
	return ev, added, tx.KVCommit(KVBatch{Puts: []KVPut{kvPut(NamespaceCausal, causalRateKey(root), win)}})
}
