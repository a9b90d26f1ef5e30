package sqlite_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

var leaseT0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// fixedStore is a store whose clock never moves, so two stores given the
// same writes hold the same rows.
func fixedStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.TempDir(), sqlite.WithClock(func() time.Time { return leaseT0 }))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// markByReading is the general path MarkRunning stands for: read the
// Execution, and when it is starting and the fence passes, put it running.
func markByReading(tx runtime.Tx, id string, epoch int64, recovery []byte) (runtime.Execution, bool, error) {
	cur, err := tx.Execution(id)
	if errors.Is(err, runtime.ErrNotFound) {
		return runtime.Execution{}, false, nil
	}
	if err != nil {
		return runtime.Execution{}, false, err
	}
	if cur.State != runtime.ExecutionStarting {
		return runtime.Execution{}, false, nil
	}
	if err := tx.CheckLease(cur.Lease, epoch); errors.Is(err, runtime.ErrConflict) {
		return runtime.Execution{}, false, nil
	} else if err != nil {
		return runtime.Execution{}, false, err
	}
	cur.State, cur.Epoch = runtime.ExecutionRunning, epoch
	if recovery != nil {
		cur.Recovery = recovery
	}
	x, err := tx.PutExecution(cur)
	return x, err == nil, err
}

// MarkRunning's one fenced UPDATE marks exactly what reading and putting
// the Execution marks, stores the same row, and writes nothing where that
// path writes nothing: for each state an Execution and its lease can be
// in, on two stores given the same history.
func TestMarkRunningAgreesWithReadingAndPutting(t *testing.T) {
	type setup struct {
		state    runtime.ExecutionState
		recovery string // stored before the mark
		lease    string // "", "superseded" or "released"
	}
	cases := map[string]struct {
		setup    setup
		id       string
		epoch    int64
		recovery []byte
		marked   bool
	}{
		"starting":                   {setup{state: runtime.ExecutionStarting}, "x-1", 1, []byte(`{"run":1}`), true},
		"starting, metadata kept":    {setup{state: runtime.ExecutionStarting, recovery: `{"kept":true}`}, "x-1", 1, nil, true},
		"starting, metadata emptied": {setup{state: runtime.ExecutionStarting, recovery: `{"kept":true}`}, "x-1", 1, []byte{}, true},
		"starting, superseded epoch": {setup{state: runtime.ExecutionStarting, lease: "superseded"}, "x-1", 1, []byte(`{"run":1}`), false},
		"starting, at the new epoch": {setup{state: runtime.ExecutionStarting, lease: "superseded"}, "x-1", 2, []byte(`{"run":2}`), true},
		"starting, lease released":   {setup{state: runtime.ExecutionStarting, lease: "released"}, "x-1", 1, []byte(`{"run":1}`), false},
		"starting, a future epoch":   {setup{state: runtime.ExecutionStarting}, "x-1", 2, []byte(`{"run":1}`), false},
		"running":                    {setup{state: runtime.ExecutionRunning, recovery: `{"run":0}`}, "x-1", 1, []byte(`{"run":1}`), false},
		"succeeded":                  {setup{state: runtime.ExecutionSucceeded}, "x-1", 1, []byte(`{"run":1}`), false},
		"unknown execution":          {setup{state: runtime.ExecutionStarting}, "x-2", 1, []byte(`{"run":1}`), false},
	}
	prepare := func(t *testing.T, s *sqlite.Store, su setup) {
		require.NoError(t, s.Transact(t.Context(), func(tx runtime.Tx) error {
			l, err := tx.AcquireLease(runtime.LeaseRequest{Name: "work/w-1", Holder: "engine", Now: leaseT0, TTL: time.Hour})
			if err != nil {
				return err
			}
			if _, err := tx.PutExecution(runtime.Execution{ID: "x-1", WorkID: "w-1", Attempt: 1, Executor: "e",
				Lease: l.Name, Epoch: l.Epoch, State: su.state, Recovery: json.RawMessage(su.recovery), StartedAt: leaseT0}); err != nil {
				return err
			}
			switch su.lease {
			case "superseded":
				_, err = tx.AcquireLease(runtime.LeaseRequest{Name: "work/w-1", Holder: "other", Now: leaseT0, TTL: time.Hour, Supersede: true})
			case "released":
				err = tx.ReleaseLease("work/w-1", l.Epoch)
			}
			return err
		}))
	}
	read := func(t *testing.T, s *sqlite.Store) (x runtime.Execution, l runtime.Lease) {
		require.NoError(t, s.View(t.Context(), func(r runtime.ReadTx) error {
			var err error
			if x, err = r.Execution("x-1"); err != nil {
				return err
			}
			l, err = r.Lease("work/w-1")
			return err
		}))
		return x, l
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			fast, general := fixedStore(t), fixedStore(t)
			prepare(t, fast, c.setup)
			prepare(t, general, c.setup)
			before, _ := read(t, fast)
			var (
				fastX, generalX           runtime.Execution
				fastMarked, generalMarked bool
			)
			// The Execution as its start stored it, at the case's ID and epoch.
			x := before
			x.ID, x.Epoch = c.id, c.epoch
			require.NoError(t, fast.Transact(t.Context(), func(tx runtime.Tx) error {
				var err error
				fastX, fastMarked, err = tx.(runtime.StartTx).MarkRunning(x, c.recovery)
				return err
			}))
			require.NoError(t, general.Transact(t.Context(), func(tx runtime.Tx) error {
				var err error
				generalX, generalMarked, err = markByReading(tx, c.id, c.epoch, c.recovery)
				return err
			}))
			assert.Equal(t, c.marked, generalMarked, "the general path's answer (the case's premise)")
			assert.Equal(t, generalMarked, fastMarked, "marked")
			assert.Equal(t, generalX, fastX, "the Execution returned")
			fastRow, fastLease := read(t, fast)
			generalRow, generalLease := read(t, general)
			assert.Equal(t, generalRow, fastRow, "the stored Execution")
			assert.Equal(t, generalLease, fastLease, "the stored lease")
			if !fastMarked {
				assert.Equal(t, before, fastRow, "nothing written")
			} else {
				assert.Equal(t, runtime.ExecutionRunning, fastRow.State)
				assert.Equal(t, c.epoch, fastRow.Epoch)
			}
		})
	}
}

// Metadata an executor sends is checked before anything is written.
func TestMarkRunningRefusesInvalidMetadata(t *testing.T) {
	s := fixedStore(t)
	ctx := t.Context()
	var x runtime.Execution
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		l, err := tx.AcquireLease(runtime.LeaseRequest{Name: "work/w-1", Holder: "engine", Now: leaseT0, TTL: time.Hour})
		if err != nil {
			return err
		}
		x, err = tx.PutExecution(runtime.Execution{ID: "x-1", WorkID: "w-1", Attempt: 1, Lease: l.Name, Epoch: l.Epoch,
			State: runtime.ExecutionStarting})
		return err
	}))
	for name, doc := range map[string]string{"duplicate key": `{"a":1,"a":2}`, "not JSON": `{"a":`, "invalid UTF-8": "\"\xff\""} {
		err := s.Transact(ctx, func(tx runtime.Tx) error {
			_, _, err := tx.(runtime.StartTx).MarkRunning(x, []byte(doc))
			return err
		})
		assert.ErrorIs(t, err, runtime.ErrInvalid, name)
	}
	require.NoError(t, s.View(ctx, func(r runtime.ReadTx) error {
		x, err := r.Execution("x-1")
		assert.Equal(t, runtime.ExecutionStarting, x.State)
		assert.Empty(t, x.Recovery)
		return err
	}))
}

// AcquireLease is one statement, and that statement keeps the rule: a
// lease another holder holds live is refused (and left as it was) unless
// superseded; a released or expired one, or one its holder asks for
// again, moves to its next epoch.
func TestAcquireLeaseKeepsTheRuleInOneStatement(t *testing.T) {
	type stored struct {
		holder   string
		expires  time.Duration // after leaseT0
		released bool
	}
	cases := map[string]struct {
		stored    *stored
		holder    string
		supersede bool
		epoch     int64 // 0: refused
	}{
		"new":                       {nil, "a", false, 1},
		"held live by another":      {&stored{"b", time.Minute, false}, "a", false, 0},
		"superseded":                {&stored{"b", time.Minute, false}, "a", true, 3},
		"released":                  {&stored{"b", time.Minute, true}, "a", false, 3},
		"expired":                   {&stored{"b", -time.Second, false}, "a", false, 3},
		"expiring at that instant":  {&stored{"b", 0, false}, "a", false, 3},
		"its own holder again":      {&stored{"a", time.Minute, false}, "a", false, 3},
		"released and superseded":   {&stored{"b", time.Minute, true}, "a", true, 3},
		"expired, another asks too": {&stored{"b", -time.Minute, false}, "c", false, 3},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := fixedStore(t)
			ctx := t.Context()
			if c.stored != nil {
				// Two epochs, so a stored epoch of 2 moves to 3.
				require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
					for range 2 {
						if _, err := tx.AcquireLease(runtime.LeaseRequest{Name: "l", Holder: c.stored.holder, Now: leaseT0.Add(c.stored.expires - time.Hour), TTL: time.Hour, Supersede: true}); err != nil {
							return err
						}
					}
					if c.stored.released {
						return tx.ReleaseLease("l", 2)
					}
					return nil
				}))
			}
			var before runtime.Lease
			if c.stored != nil {
				require.NoError(t, s.View(ctx, func(r runtime.ReadTx) error {
					var err error
					before, err = r.Lease("l")
					return err
				}))
			}
			var got runtime.Lease
			cost, err := sqlite.MeasureWrites(ctx, s, func() error {
				return s.Transact(ctx, func(tx runtime.Tx) error {
					var err error
					got, err = tx.AcquireLease(runtime.LeaseRequest{Name: "l", Holder: c.holder, Now: leaseT0, TTL: time.Minute, Supersede: c.supersede})
					return err
				})
			})
			var after runtime.Lease
			require.NoError(t, s.View(ctx, func(r runtime.ReadTx) error {
				var err error
				after, err = r.Lease("l")
				if c.epoch == 0 || !errors.Is(err, runtime.ErrNotFound) {
					return err
				}
				return nil
			}))
			if c.epoch == 0 {
				require.ErrorIs(t, err, runtime.ErrConflict)
				assert.Contains(t, err.Error(), `held by "b" at epoch 2`)
				assert.Equal(t, before, after, "a refused acquisition writes nothing")
				return
			}
			require.NoError(t, err)
			want := runtime.Lease{Name: "l", Holder: c.holder, Epoch: c.epoch, ExpiresAt: leaseT0.Add(time.Minute)}
			assert.Equal(t, want, got, "returned")
			assert.Equal(t, want, after, "stored")
			assert.Len(t, cost.Statements, 1, "statements")
		})
	}
}

// An Execution's ID stays with its Work: putting it under another is
// invalid, whether or not the fence would pass, and changes nothing.
func TestPutExecutionKeepsItsWork(t *testing.T) {
	s := fixedStore(t)
	ctx := t.Context()
	var l runtime.Lease
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		var err error
		if l, err = tx.AcquireLease(runtime.LeaseRequest{Name: "work/w-1", Holder: "engine", Now: leaseT0, TTL: time.Hour}); err != nil {
			return err
		}
		_, err = tx.PutExecution(runtime.Execution{ID: "x-1", WorkID: "w-1", Attempt: 1, Lease: l.Name, Epoch: l.Epoch, State: runtime.ExecutionRunning})
		return err
	}))
	for name, epoch := range map[string]int64{"fenced": l.Epoch, "stale epoch": l.Epoch + 5} {
		err := s.Transact(ctx, func(tx runtime.Tx) error {
			_, err := tx.PutExecution(runtime.Execution{ID: "x-1", WorkID: "w-2", Attempt: 1, Lease: l.Name, Epoch: epoch, State: runtime.ExecutionFailed})
			return err
		})
		require.ErrorIs(t, err, runtime.ErrInvalid, name)
		assert.Contains(t, err.Error(), `belongs to work "w-1"`, name)
	}
	require.NoError(t, s.View(ctx, func(r runtime.ReadTx) error {
		x, err := r.Execution("x-1")
		assert.Equal(t, "w-1", x.WorkID)
		assert.Equal(t, runtime.ExecutionRunning, x.State)
		return err
	}))
}

// SetWorkState's one UPDATE stores what PutWork of the same Work in the
// new state stores (the row, its keys, the change logged), and refuses
// what PutWork refuses, writing nothing.
func TestSetWorkStateAgreesWithPutWork(t *testing.T) {
	base := runtime.Work{ID: "w-1", ScopeID: "s1", Kind: "task", Binding: "b", State: runtime.WorkPending,
		CorrelationKeys: []string{"k1", "k2"}, Display: json.RawMessage(`{"title":"t"}`),
		Context: json.RawMessage(`{"c":1}`), Grants: []string{"g"}}
	type outcome struct {
		work    runtime.Work
		err     error
		stored  runtime.Work
		byKey   []runtime.Work
		changes []runtime.Change
	}
	run := func(t *testing.T, put bool, id string, revision int64) outcome {
		s := fixedStore(t)
		ctx := t.Context()
		var stored runtime.Work
		require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
			var err error
			if stored, err = tx.PutWork(base); err != nil {
				return err
			}
			stored, err = tx.PutWork(stored) // revision 2
			return err
		}))
		w := stored
		w.ID, w.Revision = id, revision
		var o outcome
		o.err = s.Transact(ctx, func(tx runtime.Tx) error {
			var err error
			if put {
				next := w
				next.State = runtime.WorkRunning
				o.work, err = tx.PutWork(next)
			} else {
				o.work, err = tx.(runtime.StartTx).SetWorkState(w, runtime.WorkRunning)
			}
			return err
		})
		require.NoError(t, s.View(ctx, func(r runtime.ReadTx) error {
			var err error
			if o.stored, err = r.Work("w-1"); err != nil {
				return err
			}
			if o.byKey, err = r.Works(runtime.WorkFilter{CorrelationKey: "k2"}); err != nil {
				return err
			}
			o.changes, err = r.Changes(0, 100)
			return err
		}))
		return o
	}
	for name, c := range map[string]struct {
		id       string
		revision int64
		want     error
	}{
		"at its revision":      {"w-1", 2, nil},
		"at an older revision": {"w-1", 1, runtime.ErrConflict},
		"at a later revision":  {"w-1", 3, runtime.ErrConflict},
		"absent":               {"w-2", 2, runtime.ErrNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			put, set := run(t, true, c.id, c.revision), run(t, false, c.id, c.revision)
			if c.want != nil {
				require.ErrorIs(t, put.err, c.want, "PutWork (the case's premise)")
				require.ErrorIs(t, set.err, c.want)
			} else {
				require.NoError(t, put.err)
				require.NoError(t, set.err)
				assert.Equal(t, runtime.WorkRunning, set.work.State)
				assert.Equal(t, int64(3), set.work.Revision)
			}
			assert.Equal(t, put.work, set.work, "returned")
			assert.Equal(t, put.stored, set.stored, "stored")
			assert.Equal(t, put.byKey, set.byKey, "found by its key")
			assert.Equal(t, put.changes, set.changes, "the change log")
		})
	}
}

// A state change is a Change, so a deferred-sync transaction refuses it
// and commits nothing, as it refuses PutWork.
func TestSetWorkStateIsRefusedUnsynced(t *testing.T) {
	s := fixedStore(t)
	ctx := t.Context()
	var w runtime.Work
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		var err error
		w, err = tx.PutWork(runtime.Work{ID: "w-1", State: runtime.WorkPending})
		return err
	}))
	err := s.TransactDeferSync(ctx, func(tx runtime.Tx) error {
		_, err := tx.(runtime.StartTx).SetWorkState(w, runtime.WorkRunning)
		return err
	})
	require.ErrorIs(t, err, runtime.ErrInvalid)
	require.NoError(t, s.View(ctx, func(r runtime.ReadTx) error {
		stored, err := r.Work("w-1")
		assert.Equal(t, w, stored, "nothing written")
		return err
	}))
}

// PendingWork's one read finds, page by page, the Work that paging the
// pending Work and reading each one's retry timer finds: pending, not held
// back by a retry timer due after now (a timer due at now or before, or
// one under another prefix, holds nothing back).
func TestPendingWorkAgreesWithReadingEachTimer(t *testing.T) {
	s := fixedStore(t)
	ctx := t.Context()
	now := leaseT0
	const prefix = "retry/"
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		for i := range 40 {
			id := fmt.Sprintf("w-%02d", i)
			state := runtime.WorkPending
			if i%5 == 4 {
				state = runtime.WorkRunning
			}
			if _, err := tx.PutWork(runtime.Work{ID: id, State: state}); err != nil {
				return err
			}
			due := map[int]time.Duration{0: time.Minute, 1: -time.Minute, 2: 0, 3: time.Second}[i%7]
			key := prefix + id
			if i%11 == 10 {
				key = "other/" + id
			}
			if i%7 < 4 {
				if _, err := tx.ArmTimer(runtime.Timer{Key: key, WorkID: id, Kind: "retry", Due: now.Add(due)}); err != nil {
					return err
				}
			}
		}
		return nil
	}))
	var byTimers, joined []string
	require.NoError(t, s.View(ctx, func(r runtime.ReadTx) error {
		for after := ""; ; {
			page, err := r.Works(runtime.WorkFilter{State: runtime.WorkPending, After: after, Limit: 7})
			if err != nil {
				return err
			}
			for _, w := range page {
				tm, err := r.Timer(prefix + w.ID)
				if err == nil && tm.Due.After(now) {
					continue
				}
				if err != nil && !errors.Is(err, runtime.ErrNotFound) {
					return err
				}
				byTimers = append(byTimers, w.ID)
			}
			if len(page) < 7 {
				break
			}
			after = page[len(page)-1].ID
		}
		for after := ""; ; {
			page, err := r.(interface {
				PendingWork(string, string, time.Time, int) ([]runtime.Work, error)
			}).PendingWork(after, prefix, now, 7)
			if err != nil {
				return err
			}
			for _, w := range page {
				assert.Equal(t, runtime.WorkPending, w.State)
				joined = append(joined, w.ID)
			}
			if len(page) < 7 {
				break
			}
			after = page[len(page)-1].ID
		}
		return nil
	}))
	assert.Equal(t, byTimers, joined)
	assert.NotEmpty(t, joined)
	assert.Less(t, len(joined), 32, "some pending Work is held back (the case's premise)")
}

// The read costs the pending Work it pages: it seeks the state index and
// looks each Work's timer up by key, never scanning a table or sorting.
func TestPendingWorkSeeksItsIndexes(t *testing.T) {
	dir := t.TempDir()
	openStore(t, dir)
	joined := queryPlan(t, rawDB(t, dir), sqlite.PendingWorkQuery, "retry/", "pending", "", int64(0), 500)
	assert.Contains(t, joined, "SEARCH w USING INDEX works_by_state (state=? AND id>?)", joined)
	assert.Contains(t, joined, "SEARCH t USING INDEX sqlite_autoindex_timers_1 (key=?)", joined)
	assert.NotContains(t, joined, "SCAN", joined)
	assert.NotContains(t, joined, "TEMP B-TREE", joined)
}
