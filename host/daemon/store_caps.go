package daemon

import (
	"context"
	"time"

	"github.com/open-conduit/open-conduit/runtime"
)

// The store's optional capabilities (runtime.PreAcceptStore: a push routed
// in its accepting commit; runtime.DeferredSyncStore: an Execution's start
// in one synced write; runtime.CommittedSequenceStore: a routing pass with
// nothing to route reads nothing) are found by the engine with type assertions, so a
// wrapper that only embeds runtime.Store hides them. engineStore gives the
// engine the notifying store with each capability the store under it has,
// and no other: claiming one it lacks would make the engine take a path
// the store cannot keep.

// engineStore returns s as the engine sees it: with every capability when
// the store under it has them all (runtime/sqlite), else with none (the
// faultinject build's killing store, whose kill points count the steps of
// ordinary transactions).
func (s notifyingStore) engineStore() runtime.Store {
	pre, hasPre := s.Store.(runtime.PreAcceptStore)
	def, hasDef := s.Store.(runtime.DeferredSyncStore)
	seq, hasSeq := s.Store.(runtime.CommittedSequenceStore)
	if hasPre && hasDef && hasSeq {
		return capableStore{s, pre, def, seq}
	}
	return s
}

// capableStore is a notifyingStore over a store with every capability; a
// deferred commit notifies and journals as a synced one does.
type capableStore struct {
	notifyingStore
	pre runtime.PreAcceptStore
	def runtime.DeferredSyncStore
	seq runtime.CommittedSequenceStore
}

func (s capableStore) Now() time.Time { return s.pre.Now() }

func (s capableStore) CommittedSequence() (int64, bool) { return s.seq.CommittedSequence() }

func (s capableStore) TransactDeferSync(ctx context.Context, fn func(runtime.Tx) error) error {
	return s.journaled(ctx, s.def.TransactDeferSync, fn)
}

// preAcceptTx is a journalingTx over a runtime.PreAcceptTx.
type preAcceptTx struct {
	*journalingTx
	under runtime.PreAcceptTx
}

func (t preAcceptTx) AcceptEventAt(env runtime.Envelope, at time.Time) (runtime.Event, bool, error) {
	return t.under.AcceptEventAt(env, at)
}

// startingTx is a preAcceptTx over a runtime.StartTx as well; the run a
// MarkRunning marks is journaled as a PutExecution's is.
type startingTx struct {
	preAcceptTx
	start runtime.StartTx
}

func (t startingTx) PendingWork(after, retryPrefix string, now time.Time, limit int) ([]runtime.Work, error) {
	return t.start.PendingWork(after, retryPrefix, now, limit)
}

func (t startingTx) SetWorkState(w runtime.Work, state runtime.WorkState) (runtime.Work, error) {
	return t.start.SetWorkState(w, state)
}

func (t startingTx) PriorAttempts(workID, namespace, key string) (runtime.PriorAttempts, error) {
	return t.start.PriorAttempts(workID, namespace, key)
}

func (t startingTx) MarkRunning(x runtime.Execution, recovery []byte) (runtime.Execution, bool, error) {
	x, marked, err := t.start.MarkRunning(x, recovery)
	if err == nil && marked {
		t.note(x)
	}
	return x, marked, err
}

// wrapTx gives fn a journalingTx with the PreAcceptTx capability when tx
// has it, and the StartTx one when it has both (the SQLite store's).
func wrapTx(tx runtime.Tx, jt *journalingTx) runtime.Tx {
	if p, ok := tx.(runtime.PreAcceptTx); ok {
		if st, ok := tx.(runtime.StartTx); ok {
			return startingTx{preAcceptTx{jt, p}, st}
		}
		return preAcceptTx{jt, p}
	}
	return jt
}
