package sqlite_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

// Migration 3 moves leases and executions into WITHOUT ROWID tables on a
// database the first two made, keeping every row: the fences and reads
// after it see what was there before.
func TestMigrationThreeKeepsLeasesAndExecutions(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC).UnixNano()
	s, dir := migratedFrom(t, 3, `INSERT INTO leases (name, holder, epoch, expires_at, released) VALUES ('work/w-1', 'engine', 4, ?, 0), ('work/w-2', 'engine', 1, ?, 1);
		INSERT INTO executions (id, work_id, attempt, executor, lease, epoch, state, recovery, error, started_at, ended_at, updated_at) VALUES
			('ex-b', 'w-1', 2, 'e', 'work/w-1', 4, 'running', '{"pid":2}', '', ?, 0, ?),
			('ex-a', 'w-1', 1, 'e', 'work/w-1', 3, 'failed', NULL, 'boom', ?, ?, ?),
			('ex-c', 'w-2', 1, 'e', 'work/w-2', 1, 'succeeded', NULL, '', ?, ?, ?)`,
		at+int64(time.Hour), at, at, at, at, at, at, at, at, at, at)
	require.NoError(t, s.View(t.Context(), func(r runtime.ReadTx) error {
		l, err := r.Lease("work/w-1")
		require.NoError(t, err)
		assert.Equal(t, runtime.Lease{Name: "work/w-1", Holder: "engine", Epoch: 4, ExpiresAt: time.Unix(0, at+int64(time.Hour)).UTC()}, l)
		l, err = r.Lease("work/w-2")
		require.NoError(t, err)
		assert.True(t, l.Released)
		xs, err := r.Executions("w-1")
		require.NoError(t, err)
		require.Len(t, xs, 2)
		assert.Equal(t, []string{"ex-a", "ex-b"}, []string{xs[0].ID, xs[1].ID}, "by attempt")
		assert.Equal(t, json.RawMessage(`{"pid":2}`), xs[1].Recovery)
		assert.Equal(t, "boom", xs[0].Error)
		x, err := r.Execution("ex-c")
		require.NoError(t, err)
		assert.Equal(t, runtime.ExecutionSucceeded, x.State)
		return nil
	}))
	// The fence reads the migrated lease: the current epoch writes, an
	// older one is refused.
	require.NoError(t, s.Transact(t.Context(), func(tx runtime.Tx) error {
		return tx.PersistRecovery("ex-b", 4, []byte(`{"pid":3}`))
	}))
	require.ErrorIs(t, s.Transact(t.Context(), func(tx runtime.Tx) error {
		return tx.PersistRecovery("ex-b", 3, []byte(`{"pid":4}`))
	}), runtime.ErrConflict)

	db := rawDB(t, dir)
	for _, table := range []string{"leases", "executions"} {
		var ddl string
		require.NoError(t, db.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&ddl))
		assert.Contains(t, ddl, "WITHOUT ROWID", table)
	}
	var index string
	require.NoError(t, db.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'executions_by_work'`).Scan(&index))
	assert.Contains(t, index, "(work_id)")
}
