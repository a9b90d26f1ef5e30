package sqlite_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// TestChangeLogMigrationSeedsAcceptedEvents: a database from before the
// change log (schema version 1) holding Events gets one Change per Event,
// in sequence order, so a change stream from 0 still sees the whole log.
func TestChangeLogMigrationSeedsAcceptedEvents(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	ctx := t.Context()
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		for i := range 3 {
			if _, _, err := tx.AcceptEvent(runtime.Envelope{Source: "src", DeliveryID: fmt.Sprint(i), ScopeID: "a"}); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, s.Close())

	// Turn the database back into a version-1 one: no change log.
	db := rawDB(t, dir)
	_, err := db.Exec(`DROP TABLE changes; UPDATE schema_version SET version = 1`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	s = openStore(t, dir)
	v, err := s.SchemaVersion(ctx)
	require.NoError(t, err)
	assert.Equal(t, sqlite.Migrations, v)
	var changes []runtime.Change
	var events []runtime.Event
	require.NoError(t, s.View(ctx, func(tx runtime.ReadTx) error {
		var err error
		if changes, err = tx.Changes(0, 100); err != nil {
			return err
		}
		events, err = tx.Events(0, 100)
		return err
	}))
	require.Len(t, changes, len(events))
	for i, c := range changes {
		assert.Equal(t, runtime.ChangeEvent, c.Kind)
		assert.Equal(t, events[i].ID, c.ID)
		assert.Equal(t, events[i].Sequence, c.Sequence)
		assert.Equal(t, "a", c.ScopeID)
		assert.Equal(t, events[i].AcceptedAt, c.At)
	}
	// New changes follow the seeded ones.
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutWork(runtime.Work{ID: "w", ScopeID: "a", Kind: "k", State: runtime.WorkPending})
		return err
	}))
	require.NoError(t, s.View(ctx, func(tx runtime.ReadTx) error {
		latest, err := tx.LatestChange()
		assert.Equal(t, changes[len(changes)-1].Seq+1, latest)
		return err
	}))
}
