package sqlite_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

func putKV(key, value string) func(runtime.Tx) error {
	return func(tx runtime.Tx) error {
		return tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "ns", Key: key, Value: []byte(value)}}})
	}
}

func kvValue(t *testing.T, s *sqlite.Store, key string) (string, bool) {
	t.Helper()
	var (
		v     string
		found bool
	)
	require.NoError(t, s.View(t.Context(), func(tx runtime.ReadTx) error {
		e, ok, err := tx.KVGet("ns", key)
		v, found = string(e.Value), ok
		return err
	}))
	return v, found
}

// A deferred-sync commit is visible at once and kept across a reopen,
// and the writer is back at synchronous=FULL after it, whether it
// committed or not: every other transaction still syncs.
func TestDeferredSyncCommitLeavesTheWriterSynced(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	ctx := t.Context()
	require.NoError(t, s.TransactDeferSync(ctx, putKV("a", "1")))
	v, found := kvValue(t, s, "a")
	assert.True(t, found)
	assert.Equal(t, "1", v)
	sync, err := sqlite.WriterPragma(s, "synchronous")
	require.NoError(t, err)
	assert.Equal(t, "2", sync, "synchronous=FULL after a deferred commit")

	refused := errors.New("refused")
	require.ErrorIs(t, s.TransactDeferSync(ctx, func(tx runtime.Tx) error {
		require.NoError(t, putKV("b", "1")(tx))
		return refused
	}), refused)
	_, found = kvValue(t, s, "b")
	assert.False(t, found, "a failed deferred transaction keeps nothing")
	sync, err = sqlite.WriterPragma(s, "synchronous")
	require.NoError(t, err)
	assert.Equal(t, "2", sync, "synchronous=FULL after a failed deferred transaction")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, s.TransactDeferSync(cancelled, putKV("c", "1")), context.Canceled)
	sync, err = sqlite.WriterPragma(s, "synchronous")
	require.NoError(t, err)
	assert.Equal(t, "2", sync)

	require.NoError(t, s.Close())
	s = openStore(t, dir)
	v, found = kvValue(t, s, "a")
	assert.True(t, found, "kept across a reopen")
	assert.Equal(t, "1", v)
}

// A deferred-sync transaction records no Change: accepting an Event or
// putting a Work is refused, and a function that goes on after the
// refusal commits nothing.
func TestDeferredSyncRefusesChanges(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx := t.Context()
	for name, write := range map[string]func(runtime.Tx) error{
		"accept event": func(tx runtime.Tx) error {
			_, _, err := tx.AcceptEvent(runtime.Envelope{Source: "src", DeliveryID: "d1"})
			return err
		},
		"put work": func(tx runtime.Tx) error {
			_, err := tx.PutWork(runtime.Work{ID: "w1", ScopeID: "s1", Kind: "task", Binding: "b", State: runtime.WorkPending})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := s.TransactDeferSync(ctx, write)
			assert.ErrorIs(t, err, runtime.ErrInvalid)
			err = s.TransactDeferSync(ctx, func(tx runtime.Tx) error {
				require.NoError(t, putKV("swallowed", "1")(tx))
				_ = write(tx) // the refusal ignored
				return nil
			})
			assert.ErrorIs(t, err, runtime.ErrInvalid, "the commit is refused all the same")
			_, found := kvValue(t, s, "swallowed")
			assert.False(t, found, "nothing of it committed")
		})
	}
	require.NoError(t, s.View(ctx, func(tx runtime.ReadTx) error {
		changes, err := tx.Changes(0, 10)
		assert.Empty(t, changes)
		return err
	}))
}

// The store knows which deferred commits a synced one has not covered
// yet: the next synced commit covers them, and Sync writes one when
// nothing else does.
func TestDeferredSyncIsCoveredByTheNextSyncedCommit(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx := t.Context()
	assert.False(t, s.Unsynced())
	require.NoError(t, s.TransactDeferSync(ctx, putKV("a", "1")))
	assert.True(t, s.Unsynced())
	require.NoError(t, s.Transact(ctx, putKV("b", "1")))
	assert.False(t, s.Unsynced(), "a synced commit covers the deferred ones before it")

	require.NoError(t, s.TransactDeferSync(ctx, putKV("a", "2")))
	require.True(t, s.Unsynced())
	require.NoError(t, s.Sync(ctx))
	assert.False(t, s.Unsynced(), "Sync syncs")
	require.NoError(t, s.Sync(ctx), "nothing to sync")
}

// A transaction that changes no row commits without writing the log, so it
// syncs nothing and covers no deferred commit before it: that one stays
// unsynced (for the next synced write or the store's flush) until a
// commit that wrote something. Before, any commit counted.
func TestACommitThatChangesNothingCoversNoDeferredCommit(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx := t.Context()
	require.NoError(t, s.TransactDeferSync(ctx, putKV("a", "1")))
	release := sqlite.HoldFlush(s)
	defer release()
	require.True(t, s.Unsynced())
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		_, _, err := tx.KVGet("ns", "a")
		return err
	}))
	assert.True(t, s.Unsynced(), "after a transaction that only read")
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		return tx.KVCommit(runtime.KVBatch{Deletes: []runtime.KVKey{{Namespace: "ns", Key: "absent"}}})
	}))
	assert.True(t, s.Unsynced(), "after a delete that found nothing")
	require.NoError(t, s.Transact(ctx, putKV("b", "1")))
	assert.False(t, s.Unsynced(), "a commit that wrote a row synced the log")
}
