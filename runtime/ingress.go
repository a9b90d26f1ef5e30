package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Accept accepts envelopes in one transaction and returns their Events
// once the transaction has committed, so an acknowledgement given after
// Accept returns is durable. Any refusal (an identity conflict, bad input)
// accepts none of them.
func (e *Engine) Accept(ctx context.Context, envs ...Envelope) ([]Event, error) {
	var out []Event
	err := e.store.Transact(ctx, func(tx Tx) error {
		out = out[:0]
		for i, env := range envs {
			ev, _, err := tx.AcceptEvent(env)
			if err != nil {
				return fmt.Errorf("envelope %d (%s/%s): %w", i, env.Source, env.DeliveryID, err)
			}
			out = append(out, ev)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.Kick()
	return out, nil
}

// Push has the named source verify a delivery and accepts the envelopes it
// returns, all or none. It returns only after they are durable, so the
// caller acknowledges the delivery after Push returns nil and not before.
func (e *Engine) Push(ctx context.Context, source string, d Delivery) ([]Event, error) {
	src, ok := e.conf().Sources[source]
	if !ok {
		return nil, fmt.Errorf("%w: unknown source %q", ErrNotFound, source)
	}
	envs, err := src.Ingress.Push(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("source %q push: %w", source, err)
	}
	for i := range envs {
		if err := sourceEnvelope(source, src.ScopeID, &envs[i]); err != nil {
			return nil, err
		}
	}
	return e.Accept(ctx, envs...)
}

// sourceEnvelope fills and checks what a source may say of its envelope:
// its Source is the source's name or under it, its scope the source's.
func sourceEnvelope(source, scopeID string, env *Envelope) error {
	if env.Source == "" {
		env.Source = source
	}
	if env.Source != source && !strings.HasPrefix(env.Source, source+"/") {
		return fmt.Errorf("%w: source %q produced an envelope of foreign source %q", ErrInvalid, source, env.Source)
	}
	if env.ScopeID == "" {
		env.ScopeID = scopeID
	}
	if env.ScopeID != scopeID {
		return fmt.Errorf("%w: source %q of scope %q produced an envelope for scope %q", ErrInvalid, source, scopeID, env.ScopeID)
	}
	if env.Parent != "" {
		return fmt.Errorf("%w: source %q produced a derived envelope; ingress accepts only roots", ErrInvalid, source)
	}
	return nil
}

// ReconcileReport says what one reconcile scan did.
type ReconcileReport struct {
	Pages    int
	Observed int
	// Accepted are the Events the scan added; Unchanged counts
	// observations whose (item, version) the snapshot already held.
	Accepted  []Event
	Unchanged int
	// Complete reports a complete scan: only then were Absent (items of
	// the last snapshot no page reported, now dropped from it) inferred and
	// the checkpoint advanced to Checkpoint.
	Complete   bool
	Absent     []string
	Checkpoint string
}

// ReconcileCheckpoint is a source's reconcile state as stored.
type ReconcileCheckpoint struct {
	Checkpoint  string    `json:"checkpoint"`
	Scans       int64     `json:"scans"` // complete scans so far
	CompletedAt time.Time `json:"completed_at"`
}

// reconcileItem is one item of a source's snapshot.
type reconcileItem struct {
	Version   string `json:"version"`
	Signature string `json:"signature"`
	// Scan is the ID of the last scan that saw the item, so a complete
	// scan tells the items it did not see.
	Scan string `json:"scan"`
}

func checkpointKey(source string) string { return keyJoin("checkpoint", source) }
func itemPrefix(source string) string    { return keyJoin("item", source, "") }
func itemKey(source, item string) string { return keyJoin("item", source, item) }

// Checkpoint reads a source's stored reconcile checkpoint (zero before the
// first complete scan).
func (e *Engine) Checkpoint(ctx context.Context, source string) (ReconcileCheckpoint, error) {
	var c ReconcileCheckpoint
	err := e.store.View(ctx, func(r ReadTx) error {
		_, err := kvGetJSON(r, NamespaceIngress, checkpointKey(source), &c)
		return err
	})
	return c, err
}

// Snapshot reads a source's reconcile snapshot: item → version.
func (e *Engine) Snapshot(ctx context.Context, source string) (map[string]string, error) {
	out := map[string]string{}
	err := e.store.View(ctx, func(r ReadTx) error {
		return eachItem(r, source, func(item string, st reconcileItem) error {
			out[item] = st.Version
			return nil
		})
	})
	return out, err
}

func eachItem(r ReadTx, source string, f func(item string, st reconcileItem) error) error {
	prefix := itemPrefix(source)
	after := ""
	for {
		entries, err := r.KVList(NamespaceIngress, prefix, after, MaxPageLimit)
		if err != nil {
			return err
		}
		for _, en := range entries {
			var st reconcileItem
			if _, err := kvGetJSONValue(en, &st); err != nil {
				return err
			}
			if err := f(strings.TrimPrefix(en.Key, prefix), st); err != nil {
				return err
			}
		}
		if len(entries) < MaxPageLimit {
			return nil
		}
		after = entries[len(entries)-1].Key
	}
}

// Reconcile runs one scan of the named source: it asks for pages until one
// is complete, diffs each page's observations by (item, version) against
// the last snapshot and accepts the changed ones, each page in its own
// transaction. Only a complete scan infers absence and stores the new
// checkpoint. A page with an identity conflict (an (item, version) or a
// (source, delivery) already bound to other content) accepts nothing, and
// the scan stops there with ErrConflict, having advanced nothing further.
func (e *Engine) Reconcile(ctx context.Context, source string) (ReconcileReport, error) {
	var rep ReconcileReport
	src, ok := e.conf().Sources[source]
	if !ok {
		return rep, fmt.Errorf("%w: unknown source %q", ErrNotFound, source)
	}
	scanMu := e.scanLock(source)
	scanMu.Lock()
	defer scanMu.Unlock()
	cp, err := e.Checkpoint(ctx, source)
	if err != nil {
		return rep, err
	}
	scan := newID("scan_")
	cursor := ""
	for {
		page, err := src.Ingress.Reconcile(ctx, ReconcileRequest{
			ScopeID: src.ScopeID, Checkpoint: cp.Checkpoint, Cursor: cursor, Limit: pageLimitOf(src.PageLimit),
		})
		if err != nil {
			return rep, fmt.Errorf("source %q reconcile page %d: %w", source, rep.Pages+1, err)
		}
		if err := e.applyPage(ctx, source, src.ScopeID, scan, page, &rep); err != nil {
			return rep, fmt.Errorf("source %q reconcile page %d: %w", source, rep.Pages+1, err)
		}
		rep.Pages++
		if page.Complete {
			if len(rep.Accepted) > 0 {
				e.Kick()
			}
			return rep, nil
		}
		if page.Next == "" {
			return rep, fmt.Errorf("%w: source %q page %d is neither complete nor continued", ErrInvalid, source, rep.Pages)
		}
		cursor = page.Next
	}
}

func (e *Engine) scanLock(source string) *sync.Mutex {
	e.mu.Lock()
	defer e.mu.Unlock()
	m, ok := e.scans[source]
	if !ok {
		m = &sync.Mutex{}
		e.scans[source] = m
	}
	return m
}

func pageLimitOf(n int) int {
	if n <= 0 {
		return DefaultPageLimit
	}
	return min(n, MaxPageLimit)
}

func (e *Engine) applyPage(ctx context.Context, source, scopeID, scan string, page ReconcilePage, rep *ReconcileReport) error {
	var (
		accepted  []Event
		unchanged int
		absent    []string
	)
	err := e.store.Transact(ctx, func(tx Tx) error {
		accepted, unchanged, absent = nil, 0, nil
		var batch KVBatch
		seen := map[string]reconcileItem{}
		for i, obs := range page.Observations {
			if err := ValidateIdentifier("observation item", obs.Item); err != nil {
				return fmt.Errorf("observation %d: %w", i, err)
			}
			if err := ValidateIdentifier("observation version", obs.Version); err != nil {
				return fmt.Errorf("observation %d: %w", i, err)
			}
			env := obs.Envelope
			if err := sourceEnvelope(source, scopeID, &env); err != nil {
				return fmt.Errorf("observation %d: %w", i, err)
			}
			sig, err := ValidateEnvelope(env)
			if err != nil {
				return fmt.Errorf("observation %d: %w", i, err)
			}
			if prev, dup := seen[obs.Item]; dup {
				if prev.Version != obs.Version || prev.Signature != sig {
					return fmt.Errorf("%w: item %q appears twice in one page with different content", ErrConflict, obs.Item)
				}
				continue
			}
			st := reconcileItem{Version: obs.Version, Signature: sig, Scan: scan}
			seen[obs.Item] = st
			var stored reconcileItem
			found, err := kvGetJSON(tx, NamespaceIngress, itemKey(source, obs.Item), &stored)
			if err != nil {
				return err
			}
			if found && stored.Version == obs.Version {
				if stored.Signature != sig {
					return fmt.Errorf("%w: item %q version %q is already bound to other content", ErrConflict, obs.Item, obs.Version)
				}
				unchanged++
			} else {
				ev, added, err := tx.AcceptEvent(env)
				if err != nil {
					return fmt.Errorf("item %q version %q: %w", obs.Item, obs.Version, err)
				}
				if added {
					accepted = append(accepted, ev)
				} else {
					unchanged++
				}
			}
			batch.Puts = append(batch.Puts, kvPut(NamespaceIngress, itemKey(source, obs.Item), st))
		}
		if page.Complete {
			err := eachItem(tx, source, func(item string, st reconcileItem) error {
				if _, ok := seen[item]; !ok && st.Scan != scan {
					absent = append(absent, item)
					batch.Deletes = append(batch.Deletes, KVKey{Namespace: NamespaceIngress, Key: itemKey(source, item)})
				}
				return nil
			})
			if err != nil {
				return err
			}
			var cp ReconcileCheckpoint
			if _, err := kvGetJSON(tx, NamespaceIngress, checkpointKey(source), &cp); err != nil {
				return err
			}
			cp.Checkpoint = page.Checkpoint
			cp.Scans++
			cp.CompletedAt = e.clock.Now().UTC()
			batch.Puts = append(batch.Puts, kvPut(NamespaceIngress, checkpointKey(source), cp))
		}
		if len(batch.Puts)+len(batch.Deletes) == 0 {
			return nil
		}
		return tx.KVCommit(batch)
	})
	if err != nil {
		return err
	}
	rep.Observed += len(page.Observations)
	rep.Accepted = append(rep.Accepted, accepted...)
	rep.Unchanged += unchanged
	if page.Complete {
		rep.Complete = true
		rep.Absent = absent
		rep.Checkpoint = page.Checkpoint
	}
	return nil
}

func kvGetJSONValue(en KVEntry, v any) (bool, error) {
	if err := json.Unmarshal(en.Value, v); err != nil {
		return false, fmt.Errorf("runtime: stored record %s/%q: %w", en.Namespace, en.Key, err)
	}
	return true, nil
}
