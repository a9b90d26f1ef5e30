package sqlite_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// A transaction's Changes are written together at its commit, in the
// order logged, changesPerStatement to a statement; a read of the change
// log inside the transaction sees those logged so far, and a rolled-back
// transaction leaves none.
func TestChangesAreWrittenInOrderAtTheCommit(t *testing.T) {
	ctx := t.Context()
	s := openStore(t, t.TempDir())
	var want []string
	write := func(tx runtime.Tx, from, n int) {
		for i := from; i < from+n; i++ {
			ev, _, err := tx.AcceptEvent(runtime.Envelope{Source: "src", DeliveryID: fmt.Sprint(i)})
			require.NoError(t, err)
			w, err := tx.PutWork(runtime.Work{ID: fmt.Sprint("w", i), State: runtime.WorkPending})
			require.NoError(t, err)
			want = append(want, "event "+ev.ID, "work "+w.ID)
		}
	}
	got := func(cs []runtime.Change) (out []string) {
		for _, c := range cs {
			out = append(out, string(c.Kind)+" "+c.ID)
		}
		return out
	}
	cost, err := sqlite.MeasureWrites(ctx, s, func() error {
		return s.Transact(ctx, func(tx runtime.Tx) error {
			write(tx, 0, 5)
			inside, err := tx.Changes(0, runtime.MaxPageLimit)
			require.NoError(t, err)
			assert.Equal(t, want, got(inside), "a read in the transaction sees what it logged")
			latest, err := tx.LatestChange()
			require.NoError(t, err)
			assert.Equal(t, int64(10), latest)
			write(tx, 5, 10) // 20 more: 16 and 4
			return nil
		})
	})
	require.NoError(t, err)
	var inserts int
	for _, q := range cost.Statements {
		if strings.HasPrefix(q, "INSERT INTO changes") {
			inserts++
		}
	}
	assert.Equal(t, 3, inserts, "10 Changes before the read, then 16 and 4")
	require.Error(t, s.Transact(ctx, func(tx runtime.Tx) error {
		_, _, err := tx.AcceptEvent(runtime.Envelope{Source: "src", DeliveryID: "rolled-back"})
		require.NoError(t, err)
		return fmt.Errorf("roll back")
	}))
	require.NoError(t, s.View(ctx, func(r runtime.ReadTx) error {
		cs, err := r.Changes(0, runtime.MaxPageLimit)
		require.NoError(t, err)
		assert.Equal(t, want, got(cs))
		for i, c := range cs {
			assert.Equal(t, int64(i+1), c.Seq)
		}
		return nil
	}))
}
