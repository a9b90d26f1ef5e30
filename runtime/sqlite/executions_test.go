package sqlite_test

import (
	"encoding/json"
	"errors"
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
			require.NoError(t, fast.Transact(t.Context(), func(tx runtime.Tx) error {
				var err error
				fastX, fastMarked, err = tx.(runtime.RunningMarkerTx).MarkRunning(c.id, c.epoch, c.recovery)
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
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		l, err := tx.AcquireLease(runtime.LeaseRequest{Name: "work/w-1", Holder: "engine", Now: leaseT0, TTL: time.Hour})
		if err != nil {
			return err
		}
		_, err = tx.PutExecution(runtime.Execution{ID: "x-1", WorkID: "w-1", Attempt: 1, Lease: l.Name, Epoch: l.Epoch,
			State: runtime.ExecutionStarting})
		return err
	}))
	for name, doc := range map[string]string{"duplicate key": `{"a":1,"a":2}`, "not JSON": `{"a":`, "invalid UTF-8": "\"\xff\""} {
		err := s.Transact(ctx, func(tx runtime.Tx) error {
			_, _, err := tx.(runtime.RunningMarkerTx).MarkRunning("x-1", 1, []byte(doc))
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
