package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

func committed(t *testing.T, s *sqlite.Store) int64 {
	t.Helper()
	seq, known := s.CommittedSequence()
	require.True(t, known, "the store vouches for its committed sequence")
	return seq
}

// The committed sequence counts the Events of commits only, equals the
// log's last sequence inside a write transaction, and is read from the
// log when the store opens.
func TestCommittedSequenceCountsCommittedEvents(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := sqlite.Open(dir)
	require.NoError(t, err)
	assert.Zero(t, committed(t, s))
	acceptN := func(from, n int, fail bool) error {
		return s.Transact(ctx, func(tx runtime.Tx) error {
			for i := range n {
				if _, _, err := tx.AcceptEvent(runtime.Envelope{Source: "src", DeliveryID: fmt.Sprint(from + i)}); err != nil {
					return err
				}
			}
			latest, err := tx.LatestSequence()
			require.NoError(t, err)
			seq, known := s.CommittedSequence()
			assert.True(t, known)
			if n == 0 {
				assert.Equal(t, latest, seq, "in a write transaction it is the log's last sequence")
			}
			if fail {
				return errors.New("roll back")
			}
			return nil
		})
	}
	require.NoError(t, acceptN(0, 3, false))
	assert.Equal(t, int64(3), committed(t, s))
	require.Error(t, acceptN(3, 2, true))
	assert.Equal(t, int64(3), committed(t, s), "a rolled-back acceptance is not counted")
	require.NoError(t, acceptN(0, 1, false)) // already accepted: adds nothing
	assert.Equal(t, int64(3), committed(t, s))
	require.NoError(t, acceptN(0, 0, false))
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutWork(runtime.Work{ID: "w", State: runtime.WorkPending})
		return err
	}))
	assert.Equal(t, int64(3), committed(t, s), "a commit that accepts nothing leaves it")
	require.NoError(t, s.Close())

	s = openStore(t, dir)
	assert.Equal(t, int64(3), committed(t, s), "read from the log at open")
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		_, _, err := tx.AcceptEvent(runtime.Envelope{Source: "src", DeliveryID: "next"})
		return err
	}))
	assert.Equal(t, int64(4), committed(t, s))
}

// A commit that fails after it was counted leaves the count ahead of the
// log, so the store stops vouching for it.
func TestCommittedSequenceUnknownAfterAFailedCommit(t *testing.T) {
	ctx := t.Context()
	s, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	defer s.Close()
	err = s.Transact(ctx, func(tx runtime.Tx) error {
		if _, _, err := tx.AcceptEvent(runtime.Envelope{Source: "src", DeliveryID: "1"}); err != nil {
			return err
		}
		// A foreign key checked at the commit, not the statement, fails
		// the commit itself.
		if err := sqlite.ExecInTx(tx, `PRAGMA defer_foreign_keys = ON`); err != nil {
			return err
		}
		return sqlite.ExecInTx(tx, `INSERT INTO event_works (work_id, sequence) VALUES ('w', 999)`)
	})
	require.ErrorContains(t, err, "commit")
	_, known := s.CommittedSequence()
	assert.False(t, known)
}

// A commit refused at COMMIT itself (here a deferred foreign key) leaves
// the writer out of any transaction, with nothing of the refused one kept,
// so the next transaction, synced or deferred, begins and commits.
func TestAFailedCommitLeavesTheWriterUsable(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := sqlite.Open(dir)
	require.NoError(t, err)
	transacts := map[string]func(context.Context, func(runtime.Tx) error) error{
		"synced":   s.Transact,
		"deferred": s.TransactDeferSync,
	}
	for _, mode := range []string{"synced", "deferred"} {
		transact := transacts[mode]
		err := transact(ctx, func(tx runtime.Tx) error {
			if err := tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "ns", Key: "refused-" + mode, Value: []byte("v")}}}); err != nil {
				return err
			}
			if err := sqlite.ExecInTx(tx, `PRAGMA defer_foreign_keys = ON`); err != nil {
				return err
			}
			return sqlite.ExecInTx(tx, `INSERT INTO event_works (work_id, sequence) VALUES ('w', 999)`)
		})
		require.ErrorContains(t, err, "FOREIGN KEY", "%s: the commit is refused", mode)

		open, err := sqlite.WriterInTransaction(s)
		require.NoError(t, err)
		assert.False(t, open, "%s: the refused commit's transaction is rolled back", mode)
		require.NoError(t, transact(ctx, func(tx runtime.Tx) error {
			return tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "ns", Key: "kept-" + mode, Value: []byte("v")}}})
		}), "%s: the next transaction commits", mode)
	}
	require.NoError(t, s.Close())

	s = openStore(t, dir)
	require.NoError(t, s.View(ctx, func(tx runtime.ReadTx) error {
		for _, mode := range []string{"synced", "deferred"} {
			_, found, err := tx.KVGet("ns", "refused-"+mode)
			require.NoError(t, err)
			assert.False(t, found, "%s: nothing of the refused commit is kept", mode)
			_, found, err = tx.KVGet("ns", "kept-"+mode)
			require.NoError(t, err)
			assert.True(t, found, "%s: the commit after it is kept", mode)
		}
		return nil
	}))
}
