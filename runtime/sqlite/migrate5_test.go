package sqlite_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// Migration 5 drops work_keys' index by Work on a database the first four
// made: a Work written before it still changes its keys (the dropped ones
// deleted by primary key), and a read by key sees the change.
func TestMigrationFiveDropsTheKeysIndexByWork(t *testing.T) {
	s, dir := migratedFrom(t, 5, `INSERT INTO works (id, scope_id, kind, binding, state, correlation_keys, display, context, grants, revision, created_at, updated_at) VALUES
			('w-1', 's1', 'task', 'b', 'pending', '["k1","k2"]', NULL, NULL, '[]', 1, 1, 1),
			('w-2', 's1', 'task', 'b', 'pending', '["k2"]', NULL, NULL, '[]', 1, 1, 1);
		INSERT INTO work_keys (key, work_id) VALUES ('k1', 'w-1'), ('k2', 'w-1'), ('k2', 'w-2');`)
	require.NoError(t, s.Transact(t.Context(), func(tx runtime.Tx) error {
		w, err := tx.Work("w-1")
		if err != nil {
			return err
		}
		w.CorrelationKeys = []string{"k2", "k3"}
		_, err = tx.PutWork(w)
		return err
	}))
	require.NoError(t, s.View(t.Context(), func(r runtime.ReadTx) error {
		for key, want := range map[string][]string{"k1": nil, "k2": {"w-1", "w-2"}, "k3": {"w-1"}} {
			ws, err := r.Works(runtime.WorkFilter{CorrelationKey: key})
			require.NoError(t, err)
			var ids []string
			for _, w := range ws {
				ids = append(ids, w.ID)
			}
			assert.Equal(t, want, ids, "Work holding key %q", key)
		}
		return nil
	}))
	db := rawDB(t, dir)
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'work_keys' AND sql IS NOT NULL`).Scan(&n))
	assert.Zero(t, n, "work_keys has no index but its primary key's")
	plan := queryPlan(t, db, `DELETE FROM work_keys WHERE key = ? AND work_id = ?`, "k", "w")
	assert.Contains(t, plan, "USING PRIMARY KEY (key=? AND work_id=?)", plan)
}

// A Work's update that keeps its keys writes none of them: no statement
// touches work_keys.
func TestUpdatingWorkKeepsItsKeyRows(t *testing.T) {
	ctx := t.Context()
	s := openStore(t, t.TempDir())
	var w runtime.Work
	put := func() error {
		return s.Transact(ctx, func(tx runtime.Tx) error {
			var err error
			w, err = tx.PutWork(w)
			return err
		})
	}
	w = runtime.Work{ID: "w", ScopeID: "s1", Kind: "task", State: runtime.WorkPending, CorrelationKeys: []string{"a", "b"}}
	require.NoError(t, put())
	w.State = runtime.WorkRunning
	cost, err := sqlite.MeasureWrites(ctx, s, put)
	require.NoError(t, err)
	assert.NotContains(t, strings.Join(cost.Statements, "\n"), "work_keys")
	assert.NotContains(t, cost.Btrees, "work_keys")
	require.NoError(t, s.View(ctx, func(r runtime.ReadTx) error {
		for _, key := range []string{"a", "b"} {
			ws, err := r.Works(runtime.WorkFilter{CorrelationKey: key})
			require.NoError(t, err)
			assert.Len(t, ws, 1, key)
		}
		return nil
	}))
}
