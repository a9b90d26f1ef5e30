package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// weakStore wraps a conforming store and breaks one promise of the
// contract. The store suite must fail each weakening.
type weakStore struct {
	runtime.Store
	weakness string
}

func (s weakStore) Transact(ctx context.Context, fn func(runtime.Tx) error) error {
	return s.Store.Transact(ctx, func(tx runtime.Tx) error {
		return fn(&weakTx{Tx: tx, weakness: s.weakness})
	})
}

func (s weakStore) View(ctx context.Context, fn func(runtime.ReadTx) error) error {
	return s.Store.View(ctx, func(tx runtime.ReadTx) error {
		return fn(weakReadTx{ReadTx: tx, weakness: s.weakness})
	})
}

type weakReadTx struct {
	runtime.ReadTx
	weakness string
}

// ScopeEvents ignores the scope ("unscoped_reads") or loses the first event
// of every page after the first ("lossy_cursor").
func (r weakReadTx) ScopeEvents(scopeID string, after int64, limit int) ([]runtime.Event, error) {
	switch r.weakness {
	case "unscoped_reads":
		return r.ReadTx.Events(after, limit)
	case "lossy_cursor":
		page, err := r.ReadTx.ScopeEvents(scopeID, after, limit)
		if after > 0 && len(page) > 0 {
			page = page[1:]
		}
		return page, err
	}
	return r.ReadTx.ScopeEvents(scopeID, after, limit)
}

// WorkEvents forgets the events routed to a Work by LinkEventWork
// ("named_work_events_only").
func (r weakReadTx) WorkEvents(workID string, after int64, limit int) ([]runtime.Event, error) {
	page, err := r.ReadTx.WorkEvents(workID, after, limit)
	if r.weakness != "named_work_events_only" || err != nil {
		return page, err
	}
	var named []runtime.Event
	for _, e := range page {
		if slices.Contains(e.Works, workID) {
			named = append(named, e)
		}
	}
	return named, nil
}

// Changes drops the Work changes ("changes_without_work") or the first
// change of every page after the first ("lossy_change_cursor").
func (r weakReadTx) Changes(after int64, limit int) ([]runtime.Change, error) {
	page, err := r.ReadTx.Changes(after, limit)
	if err != nil {
		return page, err
	}
	switch r.weakness {
	case "changes_without_work":
		return slices.DeleteFunc(page, func(c runtime.Change) bool { return c.Kind == runtime.ChangeWork }), nil
	case "lossy_change_cursor":
		if after > 0 && len(page) > 0 {
			page = page[1:]
		}
	}
	return page, nil
}

// ActiveWaits also lists the resolved Waits of the Works it pages
// ("resolved_waits_active").
func (r weakReadTx) ActiveWaits(afterWork string, limit int) ([]runtime.Wait, error) {
	page, err := r.ReadTx.ActiveWaits(afterWork, limit)
	if r.weakness != "resolved_waits_active" || err != nil {
		return page, err
	}
	var out []runtime.Wait
	for _, w := range page {
		all, err := r.ReadTx.Waits(w.WorkID)
		if err != nil {
			return nil, err
		}
		out = append(out, all...)
	}
	return out, nil
}

type weakTx struct {
	runtime.Tx
	weakness string
}

func (t *weakTx) ActiveWaits(afterWork string, limit int) ([]runtime.Wait, error) {
	return weakReadTx{ReadTx: t.Tx, weakness: t.weakness}.ActiveWaits(afterWork, limit)
}

func (t *weakTx) Changes(after int64, limit int) ([]runtime.Change, error) {
	return weakReadTx{ReadTx: t.Tx, weakness: t.weakness}.Changes(after, limit)
}

func (t *weakTx) ScopeEvents(scopeID string, after int64, limit int) ([]runtime.Event, error) {
	return weakReadTx{ReadTx: t.Tx, weakness: t.weakness}.ScopeEvents(scopeID, after, limit)
}

func (t *weakTx) WorkEvents(workID string, after int64, limit int) ([]runtime.Event, error) {
	return weakReadTx{ReadTx: t.Tx, weakness: t.weakness}.WorkEvents(workID, after, limit)
}

func (t *weakTx) KVCommit(b runtime.KVBatch) error {
	switch t.weakness {
	case "non_atomic_commit":
		// Apply each write on its own, then check the preconditions.
		for _, p := range b.Puts {
			if err := t.Tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{p}}); err != nil {
				return err
			}
		}
		for _, d := range b.Deletes {
			if err := t.Tx.KVCommit(runtime.KVBatch{Deletes: []runtime.KVKey{d}}); err != nil {
				return err
			}
		}
		return t.Tx.KVCommit(runtime.KVBatch{Preconditions: b.Preconditions})
	case "last_writer_wins":
		// Drop version preconditions.
		var kept []runtime.KVPrecondition
		for _, p := range b.Preconditions {
			if p.Absent {
				kept = append(kept, p)
			}
		}
		b.Preconditions = kept
	case "truncating_kv":
		// Truncate oversized values instead of refusing them.
		for i, p := range b.Puts {
			if len(p.Value) > runtime.MaxKVValueBytes {
				b.Puts[i].Value = p.Value[:runtime.MaxKVValueBytes]
			}
		}
	}
	return t.Tx.KVCommit(b)
}

func (t *weakTx) AcceptEvent(env runtime.Envelope) (runtime.Event, bool, error) {
	ev, added, err := t.Tx.AcceptEvent(env)
	switch {
	case t.weakness == "identity_without_content" && errors.Is(err, runtime.ErrConflict):
		// Treat the identity alone as the event: the first content wins silently.
		stored, lookupErr := t.Tx.EventByDelivery(env.Source, env.DeliveryID)
		if lookupErr == nil {
			return stored, false, nil
		}
	case t.weakness == "always_added" && err == nil:
		return ev, true, nil
	}
	return ev, added, err
}

// The fenced writes ignore the epoch they are given when the weakness is
// "unfenced" (every fenced path) or "unfenced_recovery" (PersistRecovery
// alone): they write at the lease's current epoch instead.
func (t *weakTx) currentEpoch(lease string, epoch int64) int64 {
	if t.weakness != "unfenced" && t.weakness != "unfenced_recovery" {
		return epoch
	}
	if l, err := t.Tx.Lease(lease); err == nil {
		return l.Epoch
	}
	return epoch
}

func (t *weakTx) PutExecution(x runtime.Execution) (runtime.Execution, error) {
	if t.weakness == "unfenced" {
		x.Epoch = t.currentEpoch(x.Lease, x.Epoch)
	}
	return t.Tx.PutExecution(x)
}

func (t *weakTx) PersistRecovery(id string, epoch int64, recovery []byte) error {
	if x, err := t.Tx.Execution(id); err == nil {
		epoch = t.currentEpoch(x.Lease, epoch)
	}
	return t.Tx.PersistRecovery(id, epoch, recovery)
}

func (t *weakTx) CheckLease(name string, epoch int64) error {
	if t.weakness == "unfenced" {
		epoch = t.currentEpoch(name, epoch)
	}
	return t.Tx.CheckLease(name, epoch)
}

// TestStoreSuiteFailsWeakenedStores is the suite's negative control: each
// weakened store breaks one promise, and the suite must report that
// promise's check as failed.
func TestStoreSuiteFailsWeakenedStores(t *testing.T) {
	cases := []struct {
		weakness string
		check    string // the check that must report it
	}{
		{"non_atomic_commit", "kv_commit_atomic"},
		{"last_writer_wins", "kv_concurrent_commit"},
		{"truncating_kv", "bad_input"},
		{"unscoped_reads", "scope_isolation"},
		{"lossy_cursor", "scope_isolation"},
		{"named_work_events_only", "work_events"},
		{"identity_without_content", "accept_identity_conflict"},
		{"always_added", "accept_concurrent"},
		{"unfenced", "lease_fencing"},
		{"unfenced_recovery", "lease_fencing"},
		{"changes_without_work", "change_log"},
		{"lossy_change_cursor", "changes_under_writers"},
		{"resolved_waits_active", "active_waits"},
	}
	for _, c := range cases {
		t.Run(c.weakness, func(t *testing.T) {
			root := t.TempDir()
			n := 0
			open := func() (runtime.Store, error) {
				n++
				s, err := sqlite.Open(fmt.Sprintf("%s/%d", root, n))
				if err != nil {
					return nil, err
				}
				return weakStore{Store: s, weakness: c.weakness}, nil
			}
			err := conformance.CheckStore(t.Context(), open)
			require.Error(t, err, "the store suite passed a store with weakness %s", c.weakness)
			assert.Contains(t, err.Error(), c.check+":", "the suite must report the broken promise")
			t.Logf("suite verdict on %s:\n%v", c.weakness, err)
		})
	}
}

// TestStoreSuitePassesTheRealStoreThroughCheckStore runs the error-returning
// core against the real store, the baseline the negative controls differ
// from.
func TestStoreSuitePassesTheRealStoreThroughCheckStore(t *testing.T) {
	root := t.TempDir()
	n := 0
	err := conformance.CheckStore(t.Context(), func() (runtime.Store, error) {
		n++
		return sqlite.Open(fmt.Sprintf("%s/%d", root, n))
	})
	require.NoError(t, err)
}
