package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
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
	out, err := e.acceptOnly(ctx, envs)
	if err != nil {
		return nil, err
	}
	e.Kick()
	return out, nil
}

// acceptOnly is Accept without the Kick.
func (e *Engine) acceptOnly(ctx context.Context, envs []Envelope) ([]Event, error) {
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
	return out, nil
}

// Push has the named source verify a delivery and accepts the envelopes it
// returns, all or none. It returns only after they are durable, so the
// caller acknowledges the delivery after Push returns nil and not before.
// When it can, it routes them in the same transaction (decideBeforeAccept);
// otherwise the routing pass does.
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
	p := e.decideBeforeAccept(ctx, envs)
	if p == nil {
		return e.Accept(ctx, envs...)
	}
	out, _, err := e.acceptRouted(ctx, envs, p)
	if err != nil {
		return nil, err
	}
	e.Kick()
	return out, nil
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
	// Scan is the ID of the scan that last changed the item (kept for
	// the record; a scan tells the items it saw by its own set).
	Scan string `json:"scan"`
	// Raw is rawDigest of the envelope as the source sent it, so an
	// unchanged observation is known by its bytes without validating and
	// signing it again (empty in snapshots written before it was kept).
	Raw string `json:"raw,omitempty"`
}

// recordHolds reports whether val, an item record as kvPut encodes it
// (fields in reconcileItem's order, Raw last when set), is the record of
// version and raw, without decoding it.
func recordHolds(val []byte, version, raw string) bool {
	v, err := json.Marshal(version)
	if err != nil || raw == "" {
		return false
	}
	prefix := append(append([]byte(`{"version":`), v...), ',')
	return bytes.HasPrefix(val, prefix) && bytes.HasSuffix(val, []byte(`,"raw":"`+raw+`"}`))
}

// rawDigest is a digest of every field of env as it stands, each
// length-prefixed: equal digests mean byte-equal envelopes, which have
// the same signature. Unequal ones may still sign alike (a payload
// written another way), which the signature then decides.
func rawDigest(env Envelope) string {
	h := sha256.New()
	var n [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, f := range []string{env.ID, env.Source, env.DeliveryID, env.ScopeID, env.Family, env.Type, env.Schema, env.Parent} {
		field([]byte(f))
	}
	field(env.Payload)
	binary.BigEndian.PutUint64(n[:], uint64(len(env.Works)))
	h.Write(n[:])
	for _, w := range env.Works {
		field([]byte(w))
	}
	if !env.OccurredAt.IsZero() {
		field([]byte(env.OccurredAt.UTC().Format(time.RFC3339Nano)))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Bounds of one reconcile page. A page over a bound, or late, fails the
// scan there: a partial scan, which infers no absence and moves no
// checkpoint, and is retried whole.
const (
	// MaxReconcilePageBytes caps the observations of one page: their
	// items, versions, identities and payloads together (8 MiB, under the
	// protocol's 16 MiB message).
	MaxReconcilePageBytes = 8 << 20
)

// ReconcilePageTimeout bounds how long a source may take to answer one
// page (real time: it bounds the source's work, not the clock's).
var ReconcilePageTimeout = 30 * time.Second

// checkPage refuses a page over its item limit or MaxReconcilePageBytes.
func checkPage(page ReconcilePage, limit int) error {
	if len(page.Observations) > limit {
		return fmt.Errorf("%w: %d observations, over the page limit of %d", ErrTooLarge, len(page.Observations), limit)
	}
	n := 0
	for _, o := range page.Observations {
		env := o.Envelope
		n += len(o.Item) + len(o.Version) + len(env.Source) + len(env.DeliveryID) + len(env.Family) + len(env.Type) +
			len(env.Schema) + len(env.Payload)
		for _, w := range env.Works {
			n += len(w)
		}
		if n > MaxReconcilePageBytes {
			return fmt.Errorf("%w: the page's observations pass %d bytes", ErrTooLarge, MaxReconcilePageBytes)
		}
	}
	return nil
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

// eachItemName calls f with the name of each item of a source's snapshot,
// without decoding its record.
func eachItemName(r ReadTx, source string, f func(item string) error) error {
	prefix := itemPrefix(source)
	after := ""
	for {
		entries, err := r.KVList(NamespaceIngress, prefix, after, MaxPageLimit)
		if err != nil {
			return err
		}
		for _, en := range entries {
			if err := f(strings.TrimPrefix(en.Key, prefix)); err != nil {
				return err
			}
		}
		if len(entries) < MaxPageLimit {
			return nil
		}
		after = entries[len(entries)-1].Key
	}
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
// transaction (an unchanged item is read, not written). Only a complete
// scan infers absence (the snapshot's items no page of the scan saw) and
// stores the new checkpoint. A page with an identity conflict (an (item,
// version) or a (source, delivery) already bound to other content)
// accepts nothing, and the scan stops there with ErrConflict, having
// advanced nothing further. Each page is bounded: answered within
// ReconcilePageTimeout, at most the page limit of observations and
// MaxReconcilePageBytes; past a bound the scan stops there as partial.
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
	seen := map[string]bool{} // the items this scan's pages reported
	limit := pageLimitOf(src.PageLimit)
	cursor := ""
	for {
		pctx, cancel := context.WithTimeout(ctx, ReconcilePageTimeout)
		page, err := src.Ingress.Reconcile(pctx, ReconcileRequest{
			ScopeID: src.ScopeID, Checkpoint: cp.Checkpoint, Cursor: cursor, Limit: limit,
		})
		if err == nil && pctx.Err() != nil {
			err = pctx.Err() // an answer after the deadline is late all the same
		}
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no answer within the page timeout of %s: %w", ReconcilePageTimeout, err)
		}
		if err == nil {
			err = checkPage(page, limit)
		}
		if err != nil {
			return rep, fmt.Errorf("source %q reconcile page %d: %w", source, rep.Pages+1, err)
		}
		if err := e.applyPage(ctx, source, src.ScopeID, scan, seen, page, &rep); err != nil {
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

// applyPage diffs one page against the snapshot in one transaction; seen
// (the scan's items so far) gains the page's items once it commits.
func (e *Engine) applyPage(ctx context.Context, source, scopeID, scan string, seen map[string]bool, page ReconcilePage, rep *ReconcileReport) error {
	var (
		accepted  []Event
		unchanged int
		absent    []string
	)
	err := e.store.Transact(ctx, func(tx Tx) error {
		accepted, unchanged, absent = nil, 0, nil
		var batch KVBatch
		inPage := map[string]reconcileItem{}
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
			raw := rawDigest(env)
			entry, found, err := tx.KVGet(NamespaceIngress, itemKey(source, obs.Item))
			if err != nil {
				return err
			}
			prev, dup := inPage[obs.Item]
			if !dup && found && recordHolds(entry.Value, obs.Version, raw) {
				// The bytes the snapshot's item was validated and signed
				// from: unchanged, nothing to decode, check again or write.
				inPage[obs.Item] = reconcileItem{Version: obs.Version, Raw: raw}
				unchanged++
				continue
			}
			if dup && prev.Raw == raw && prev.Version == obs.Version {
				continue
			}
			var stored reconcileItem
			if found {
				if _, err := kvGetJSONValue(entry, &stored); err != nil {
					return err
				}
			}
			if !dup && found && stored.Version == obs.Version && stored.Raw == raw {
				inPage[obs.Item] = stored // the same record, encoded otherwise
				unchanged++
				continue
			}
			sig, err := ValidateEnvelope(env)
			if err != nil {
				return fmt.Errorf("observation %d: %w", i, err)
			}
			if dup {
				if prev.Signature == "" {
					prev.Signature = stored.Signature // prev was the snapshot's record, known by its bytes
				}
				if prev.Version != obs.Version || prev.Signature != sig {
					return fmt.Errorf("%w: item %q appears twice in one page with different content", ErrConflict, obs.Item)
				}
				continue
			}
			st := reconcileItem{Version: obs.Version, Signature: sig, Scan: scan, Raw: raw}
			inPage[obs.Item] = st
			if found && stored.Version == obs.Version {
				if stored.Signature != sig {
					return fmt.Errorf("%w: item %q version %q is already bound to other content", ErrConflict, obs.Item, obs.Version)
				}
				unchanged++
				if stored.Raw != raw {
					// The same content in other bytes (or a snapshot from
					// before Raw): keep these, so the next scan knows them.
					stored.Raw = raw
					batch.Puts = append(batch.Puts, kvPut(NamespaceIngress, itemKey(source, obs.Item), stored))
				}
				continue
			}
			ev, added, err := tx.AcceptEvent(env)
			if err != nil {
				return fmt.Errorf("item %q version %q: %w", obs.Item, obs.Version, err)
			}
			if added {
				accepted = append(accepted, ev)
			} else {
				unchanged++
			}
			batch.Puts = append(batch.Puts, kvPut(NamespaceIngress, itemKey(source, obs.Item), st))
		}
		if page.Complete {
			err := eachItemName(tx, source, func(item string) error {
				if _, ok := inPage[item]; !ok && !seen[item] {
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
	for _, obs := range page.Observations {
		seen[obs.Item] = true
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
