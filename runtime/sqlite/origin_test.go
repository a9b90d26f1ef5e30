package sqlite_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

// The Event linked to a Work its transaction created is recorded as the
// Work's origin instead of in event_works: the Work's events, read whole
// or a page of one at a time, are the same as with every link in
// event_works, that Event once even when linked again.
func TestCreatingLinkIsTheWorksOrigin(t *testing.T) {
	ctx := t.Context()
	s, dir := migratedFrom(t, 6, `INSERT INTO works (id, scope_id, kind, binding, state, correlation_keys, display, context, grants, revision, created_at, updated_at) VALUES
			('old', 's1', 'task', 'b', 'pending', '[]', NULL, NULL, '[]', 1, 1, 1)`)
	accept := func(tx runtime.Tx, id string) runtime.Event {
		ev, _, err := tx.AcceptEvent(runtime.Envelope{Source: "src", DeliveryID: id, ScopeID: "s1", Family: "test.item"})
		require.NoError(t, err)
		return ev
	}
	var first, second, third, old runtime.Event
	check := func(wants map[string][]int64) {
		t.Helper()
		for work, want := range wants {
			for _, limit := range []int{1, 100} {
				var got []int64
				var after int64
				for {
					var page []runtime.Event
					require.NoError(t, s.View(ctx, func(r runtime.ReadTx) error {
						var err error
						page, err = r.WorkEvents(work, after, limit)
						return err
					}))
					if len(page) == 0 {
						break
					}
					for _, ev := range page {
						got = append(got, ev.Sequence)
					}
					after = page[len(page)-1].Sequence
				}
				assert.Equal(t, want, got, "%s by pages of %d", work, limit)
			}
		}
	}
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		old = accept(tx, "old")
		require.NoError(t, tx.LinkEventWork(old.ID, "old")) // a Work from before: event_works
		accept(tx, "unrelated")
		first = accept(tx, "first")
		if _, err := tx.PutWork(runtime.Work{ID: "w", ScopeID: "s1", Kind: "task", State: runtime.WorkPending}); err != nil {
			return err
		}
		if err := tx.LinkEventWork(first.ID, "w"); err != nil {
			return err
		}
		second = accept(tx, "second")
		return tx.LinkEventWork(second.ID, "w")
	}))
	check(map[string][]int64{"w": {first.Sequence, second.Sequence}, "old": {old.Sequence}})
	var origin, links int64
	db := rawDB(t, dir)
	require.NoError(t, db.QueryRow(`SELECT origin FROM works WHERE id = 'w'`).Scan(&origin))
	assert.Equal(t, first.Sequence, origin)
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM event_works WHERE work_id = 'w' AND sequence = ?`, first.Sequence).Scan(&links))
	assert.Zero(t, links, "the creating link is not in event_works")
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		third = accept(tx, "third")
		if err := tx.LinkEventWork(third.ID, "w"); err != nil {
			return err
		}
		return tx.LinkEventWork(first.ID, "w") // in event_works too now
	}))
	check(map[string][]int64{"w": {first.Sequence, second.Sequence, third.Sequence}, "old": {old.Sequence}})
}
