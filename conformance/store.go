package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/runtime"
)

// StoreCheckTimeout bounds each store check, so a store that deadlocks
// fails instead of stalling the run.
var StoreCheckTimeout = 2 * time.Minute

// storeCheck is one named promise of the Store contract.
type storeCheck struct {
	name string
	run  func(ctx context.Context, s runtime.Store) error
}

// storeChecks are the Store contract's promises, in order.
var storeChecks = []storeCheck{
	{"accept_and_read", checkAcceptAndRead},
	{"accept_idempotent", checkAcceptIdempotent},
	{"accept_identity_conflict", checkAcceptIdentityConflict},
	{"accept_concurrent", checkAcceptConcurrent},
	{"sequence_order", checkSequenceOrder},
	{"causal_chain", checkCausalChain},
	{"scope_isolation", checkScopeIsolation},
	{"cursor_under_writers", checkCursorUnderWriters},
	{"work_events", checkWorkEvents},
	{"change_log", checkChangeLog},
	{"changes_under_writers", checkChangesUnderWriters},
	{"active_waits", checkActiveWaits},
	{"work_revisions", checkWorkRevisions},
	{"lease_fencing", checkLeaseFencing},
	{"timers", checkTimers},
	{"waits", checkWaits},
	{"kv_read_write", checkKVReadWrite},
	{"kv_preconditions", checkKVPreconditions},
	{"kv_commit_atomic", checkKVCommitAtomic},
	{"kv_concurrent_commit", checkKVConcurrentCommit},
	{"bad_input", checkBadInput},
	{"transaction_rollback", checkTransactionRollback},
	{"tool_results", checkToolResults},
	{"scopes_and_artifacts", checkScopesAndArtifacts},
}

// CheckStore runs every store check, each against a fresh empty store from
// open (closed afterwards), and returns all failures joined, each prefixed
// with its check's name; nil means the store conforms.
func CheckStore(ctx context.Context, open func() (runtime.Store, error)) error {
	var errs []error
	for _, c := range storeChecks {
		if err := runStoreCheck(ctx, open, c); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// RunStore runs every store check as a named subtest of t, each against a
// fresh empty store from newStore. newStore owns the store's cleanup (for
// example with t.Cleanup).
func RunStore(t *testing.T, newStore func(t *testing.T) runtime.Store) {
	t.Helper()
	for _, c := range storeChecks {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			ctx, cancel := context.WithTimeout(t.Context(), StoreCheckTimeout)
			defer cancel()
			if err := c.run(ctx, s); err != nil {
				t.Error(err)
			}
		})
	}
}

func runStoreCheck(ctx context.Context, open func() (runtime.Store, error), c storeCheck) (err error) {
	ctx, cancel := context.WithTimeout(ctx, StoreCheckTimeout)
	defer cancel()
	s, err := open()
	if err != nil {
		return fmt.Errorf("opening a store: %w", err)
	}
	defer func() {
		if closeErr := s.Close(); closeErr != nil && err == nil {
			err = fmt.Errorf("closing the store: %w", closeErr)
		}
	}()
	return c.run(ctx, s)
}

// Helpers shared by the checks. Each returns an error describing the broken
// promise, or nil.

// wantIs checks that err is target.
func storeWantIs(err, target error, what string) error {
	if !errors.Is(err, target) {
		return fmt.Errorf("%s: got error %v, want %v", what, err, target)
	}
	return nil
}

// accept accepts one envelope in its own transaction.
func storeAccept(ctx context.Context, s runtime.Store, env runtime.Envelope) (runtime.Event, bool, error) {
	var (
		ev    runtime.Event
		added bool
	)
	err := s.Transact(ctx, func(tx runtime.Tx) error {
		var err error
		ev, added, err = tx.AcceptEvent(env)
		return err
	})
	return ev, added, err
}

// view runs a read and returns its value.
func storeView[T any](ctx context.Context, s runtime.Store, read func(runtime.ReadTx) (T, error)) (T, error) {
	var v T
	err := s.View(ctx, func(tx runtime.ReadTx) error {
		var err error
		v, err = read(tx)
		return err
	})
	return v, err
}

func storeLatest(ctx context.Context, s runtime.Store) (int64, error) {
	return storeView(ctx, s, func(tx runtime.ReadTx) (int64, error) { return tx.LatestSequence() })
}

// sequences lists the sequences of events.
func storeSequences(evs []runtime.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Sequence
	}
	return out
}

// pageAll reads every page of a cursor read with the given page size.
func storePageAll(ctx context.Context, s runtime.Store, limit int, read func(tx runtime.ReadTx, after int64, limit int) ([]runtime.Event, error)) ([]runtime.Event, error) {
	var all []runtime.Event
	var after int64
	for {
		page, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.Event, error) { return read(tx, after, limit) })
		if err != nil {
			return nil, err
		}
		if len(page) > limit {
			return nil, fmt.Errorf("page of %d events exceeds limit %d", len(page), limit)
		}
		if len(page) == 0 {
			return all, nil
		}
		all = append(all, page...)
		after = page[len(page)-1].Sequence
	}
}

func storeIncreasing(seqs []int64) error {
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			return fmt.Errorf("sequences not strictly increasing at %d: %v", i, seqs)
		}
	}
	return nil
}
