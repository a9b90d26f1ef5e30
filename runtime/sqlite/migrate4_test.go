package sqlite_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

// Migration 4 moves works into a WITHOUT ROWID table on a database the
// first three made, keeping every row and both indexes: reads by ID, by
// scope, by state and by key, and revision-checked writes, see what was
// there before.
func TestMigrationFourKeepsWorks(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC).UnixNano()
	s, dir := migratedFrom(t, 4, `INSERT INTO works (id, scope_id, kind, binding, state, correlation_keys, display, context, grants, revision, created_at, updated_at) VALUES
			('w-2', 's1', 'task', 'b', 'running', '["k2"]', '{"title":"two"}', '{"n":2}', '["g"]', 3, ?, ?),
			('w-1', 's1', 'task', 'b', 'pending', '["k1"]', NULL, NULL, '[]', 1, ?, ?),
			('w-3', 's2', 'task', 'b', 'pending', '[]', NULL, NULL, '[]', 1, ?, ?);
		INSERT INTO work_keys (key, work_id) VALUES ('k1', 'w-1'), ('k2', 'w-2');`,
		at, at+1, at, at, at, at)
	ids := func(ws []runtime.Work) (out []string) {
		for _, w := range ws {
			out = append(out, w.ID)
		}
		return out
	}
	require.NoError(t, s.View(t.Context(), func(r runtime.ReadTx) error {
		w, err := r.Work("w-2")
		require.NoError(t, err)
		assert.Equal(t, runtime.Work{ID: "w-2", ScopeID: "s1", Kind: "task", Binding: "b", State: runtime.WorkRunning,
			CorrelationKeys: []string{"k2"}, Display: json.RawMessage(`{"title":"two"}`), Context: json.RawMessage(`{"n":2}`),
			Grants: []string{"g"}, Revision: 3, CreatedAt: time.Unix(0, at).UTC(), UpdatedAt: time.Unix(0, at+1).UTC()}, w)
		ws, err := r.Works(runtime.WorkFilter{ScopeID: "s1"})
		require.NoError(t, err)
		assert.Equal(t, []string{"w-1", "w-2"}, ids(ws))
		ws, err = r.Works(runtime.WorkFilter{State: runtime.WorkPending})
		require.NoError(t, err)
		assert.Equal(t, []string{"w-1", "w-3"}, ids(ws))
		ws, err = r.Works(runtime.WorkFilter{CorrelationKey: "k2"})
		require.NoError(t, err)
		assert.Equal(t, []string{"w-2"}, ids(ws))
		return nil
	}))
	require.NoError(t, s.Transact(t.Context(), func(tx runtime.Tx) error {
		w, err := tx.Work("w-1")
		if err != nil {
			return err
		}
		w.State = runtime.WorkDone
		_, err = tx.PutWork(w)
		return err
	}))
	require.ErrorIs(t, s.Transact(t.Context(), func(tx runtime.Tx) error {
		_, err := tx.PutWork(runtime.Work{ID: "w-3", State: runtime.WorkPending})
		return err
	}), runtime.ErrConflict, "creating a migrated Work's ID again")

	db := rawDB(t, dir)
	var ddl string
	require.NoError(t, db.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'works'`).Scan(&ddl))
	assert.Contains(t, ddl, "WITHOUT ROWID")
	for _, index := range []string{"works_by_scope", "works_by_state"} {
		var n int
		require.NoError(t, db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?`, index).Scan(&n))
		assert.Equal(t, 1, n, index)
	}
}
