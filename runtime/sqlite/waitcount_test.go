package sqlite_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// A write transaction's WaitsForKey skips its read while the store knows
// no Wait is active; it must find what a read-only snapshot's (which
// always reads) finds, through every way the count moves: a Wait made
// active, satisfied, made active again, a transaction rolled back, a
// Wait made and looked up in one transaction, and a reopened store.
func TestWaitsForKeyInAWriteFindsWhatAReadFinds(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	ctx := t.Context()
	put := func(id string, state runtime.WaitState, keys ...string) {
		t.Helper()
		require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
			_, err := tx.PutWait(runtime.Wait{ID: id, WorkID: "w-" + id, Keys: keys, State: state})
			return err
		}))
	}
	check := func(step string) {
		t.Helper()
		for _, key := range []string{"k1", "k2"} {
			var read, written []runtime.Wait
			require.NoError(t, s.View(ctx, func(r runtime.ReadTx) error {
				var err error
				read, err = r.WaitsForKey(key)
				return err
			}))
			require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
				var err error
				written, err = tx.WaitsForKey(key)
				return err
			}))
			assert.Equal(t, read, written, "%s: waits for %s", step, key)
		}
	}
	check("none")
	put("a", runtime.WaitActive, "k1")
	check("one active")
	put("b", runtime.WaitActive, "k1", "k2")
	put("a", runtime.WaitSatisfied, "k1")
	check("one of two satisfied")
	put("b", runtime.WaitSatisfied, "k1", "k2")
	check("both satisfied")
	put("b", runtime.WaitSatisfied, "k1", "k2")
	check("satisfied again")

	rolledBack := errors.New("rolled back")
	err := s.Transact(ctx, func(tx runtime.Tx) error {
		if _, err := tx.PutWait(runtime.Wait{ID: "c", WorkID: "w-c", Keys: []string{"k1"}, State: runtime.WaitActive}); err != nil {
			return err
		}
		return rolledBack
	})
	require.ErrorIs(t, err, rolledBack)
	check("an activation rolled back")

	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		if _, err := tx.PutWait(runtime.Wait{ID: "d", WorkID: "w-d", Keys: []string{"k2"}, State: runtime.WaitActive}); err != nil {
			return err
		}
		waits, err := tx.WaitsForKey("k2")
		assert.Len(t, waits, 1, "a Wait made active is found in its own transaction")
		return err
	}))
	check("one active again")

	require.NoError(t, s.Close())
	s = openStore(t, dir)
	check("reopened with one active")
	put("d", runtime.WaitSatisfied, "k2")
	check("reopened, none active")
}

// With no Wait active, a write transaction's WaitsForKey runs no
// statement; with one, it reads; with it satisfied, it reads nothing again.
func TestWaitsForKeyReadsNothingWhileNoWaitIsActive(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx := t.Context()
	lookup := func() sqlite.WriteCost {
		t.Helper()
		cost, err := sqlite.MeasureWrites(ctx, s, func() error {
			return s.Transact(ctx, func(tx runtime.Tx) error {
				_, err := tx.WaitsForKey("k1")
				return err
			})
		})
		require.NoError(t, err)
		return cost
	}
	assert.Empty(t, lookup().Statements, "no Wait active")
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutWait(runtime.Wait{ID: "a", WorkID: "w-a", Keys: []string{"k2"}, State: runtime.WaitActive})
		return err
	}))
	assert.Len(t, lookup().Statements, 1, "one Wait active")
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutWait(runtime.Wait{ID: "a", WorkID: "w-a", Keys: []string{"k2"}, State: runtime.WaitSatisfied})
		return err
	}))
	assert.Empty(t, lookup().Statements, "the Wait satisfied")
}

// A commit that fails after it counted a Wait's end leaves the count
// unknown (it says none is active while the refused commit left one so),
// so a write transaction's WaitsForKey reads from then on.
func TestWaitsForKeyReadsAfterAFailedCommit(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx := t.Context()
	active := runtime.Wait{ID: "a", WorkID: "w-a", Keys: []string{"k1"}, State: runtime.WaitActive}
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutWait(active)
		return err
	}))
	err := s.Transact(ctx, func(tx runtime.Tx) error {
		satisfied := active
		satisfied.State = runtime.WaitSatisfied
		if _, err := tx.PutWait(satisfied); err != nil {
			return err
		}
		// A foreign key checked at the commit fails the commit itself.
		if err := sqlite.ExecInTx(tx, `PRAGMA defer_foreign_keys = ON`); err != nil {
			return err
		}
		return sqlite.ExecInTx(tx, `INSERT INTO event_works (work_id, sequence) VALUES ('w', 999)`)
	})
	require.ErrorContains(t, err, "commit")
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		waits, err := tx.WaitsForKey("k1")
		assert.Len(t, waits, 1, "the Wait the refused commit left active")
		return err
	}))
}
