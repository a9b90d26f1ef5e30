package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

func rawDB(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.DatabaseFile))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// migratedFrom opens a store over a database the migrations before
// version made, holding what seed writes (SQL with its args), and checks
// that opening it ran the rest. dir is the database's directory.
func migratedFrom(t *testing.T, version int, seed string, args ...any) (s *sqlite.Store, dir string) {
	t.Helper()
	dir = t.TempDir()
	db := rawDB(t, dir)
	for _, m := range sqlite.MigrationsBefore(version) {
		_, err := db.Exec(m)
		require.NoError(t, err)
	}
	_, err := db.Exec(`CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (?);`, version-1)
	require.NoError(t, err)
	_, err = db.Exec(seed, args...)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	s = openStore(t, dir)
	v, err := s.SchemaVersion(t.Context())
	require.NoError(t, err)
	require.Equal(t, sqlite.Migrations, v, "opening the store ran the migrations from %d on", version)
	return s, dir
}

func TestReopenKeepsDataAndSchema(t *testing.T) {
	dir := t.TempDir()
	s, err := sqlite.Open(dir)
	require.NoError(t, err)
	ctx := t.Context()
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		if _, _, err := tx.AcceptEvent(runtime.Envelope{Source: "src", DeliveryID: "1"}); err != nil {
			return err
		}
		return tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "ns", Key: "k", Value: []byte("v")}}})
	}))
	require.NoError(t, s.Close())
	require.Error(t, s.Transact(ctx, func(runtime.Tx) error { return nil }), "a closed store refuses transactions")

	s = openStore(t, dir)
	v, err := s.SchemaVersion(ctx)
	require.NoError(t, err)
	assert.Equal(t, sqlite.Migrations, v)
	require.NoError(t, s.View(ctx, func(tx runtime.ReadTx) error {
		seq, err := tx.LatestSequence()
		assert.Equal(t, int64(1), seq)
		e, found, _ := tx.KVGet("ns", "k")
		assert.True(t, found)
		assert.Equal(t, "v", string(e.Value))
		return err
	}))
	var mode string
	require.NoError(t, rawDB(t, dir).QueryRow(`PRAGMA journal_mode`).Scan(&mode))
	assert.Equal(t, "wal", mode)
	sync, err := sqlite.WriterPragma(s, "synchronous")
	require.NoError(t, err)
	assert.Equal(t, "2", sync, "the writer commits with synchronous=FULL")
}

func TestOpenRefusesANewerSchema(t *testing.T) {
	dir := t.TempDir()
	s, err := sqlite.Open(dir)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = rawDB(t, dir).Exec(`UPDATE schema_version SET version = version + 1`)
	require.NoError(t, err)
	_, err = sqlite.Open(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "newer than this build")
}

// TestPageReadsUseTheirIndexes checks the query plans: a scope page and a
// Work's events seek an index instead of scanning the log.
func TestPageReadsUseTheirIndexes(t *testing.T) {
	dir := t.TempDir()
	openStore(t, dir)
	db := rawDB(t, dir)
	// Routing looks open Work up by key in the scope on every match.
	byKey, byKeyArgs := sqlite.WorksQuery(runtime.WorkFilter{ScopeID: "s", CorrelationKey: "k", Limit: 100})
	for name, c := range map[string]struct {
		query, want string
		args        []any
	}{
		"scope events":      {query: sqlite.ScopeEventsQuery, want: "USING INDEX events_by_scope (scope_id=? AND sequence>?)"},
		"work events":       {query: sqlite.WorkEventsQuery, want: "USING PRIMARY KEY (work_id=? AND sequence>?)"},
		"changes":           {query: sqlite.ChangesQuery, want: "USING INTEGER PRIMARY KEY (rowid>?)"},
		"active waits":      {query: sqlite.ActiveWaitsQuery, want: "USING INDEX waits_one_active (work_id>?)"},
		"scope work by key": {query: byKey, want: "SEARCH k USING PRIMARY KEY (key=? AND work_id>?)", args: byKeyArgs},
	} {
		args := c.args
		if args == nil {
			args = []any{"x", 0, 100}
			if strings.Count(c.query, "?") == 2 {
				args = args[1:]
			}
		}
		joined := queryPlan(t, db, c.query, args...)
		assert.Contains(t, joined, c.want, "%s plan:\n%s", name, joined)
		assert.NotContains(t, joined, "USE TEMP B-TREE", "%s must not sort: %s", name, joined)
		for _, line := range strings.Split(joined, "\n") {
			assert.False(t, strings.HasPrefix(line, "SCAN"), "%s scans: %s", name, joined)
		}
	}
}

// queryPlan is SQLite's plan for query with args, one step a line.
func queryPlan(t *testing.T, db *sql.DB, query string, args ...any) string {
	t.Helper()
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	return strings.Join(plan, "\n")
}

// TestWaitingWriterHonoursItsContext: a transaction waiting for the single
// writer gives up when its context ends, without running its function.
func TestWaitingWriterHonoursItsContext(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx := t.Context()
	holding, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.Transact(ctx, func(tx runtime.Tx) error {
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding

	// Readers are not blocked by the open write transaction.
	require.NoError(t, s.View(ctx, func(tx runtime.ReadTx) error {
		_, err := tx.LatestSequence()
		return err
	}))

	waitCtx, cancel := context.WithCancel(ctx)
	ran := false
	waited := make(chan error, 1)
	go func() {
		waited <- s.Transact(waitCtx, func(runtime.Tx) error { ran = true; return nil })
	}()
	cancel()
	err := <-waited
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, ran, "a cancelled waiting transaction ran its function")
	close(release)
	require.NoError(t, <-held)
}

func TestBlobs(t *testing.T) {
	s := openStore(t, t.TempDir())
	content := bytes.Repeat([]byte("artifact line\n"), 10_000)
	w, err := s.CreateBlob()
	require.NoError(t, err)
	for rest := content; len(rest) > 0; {
		n := min(4096, len(rest))
		_, err := w.Write(rest[:n])
		require.NoError(t, err)
		rest = rest[n:]
	}
	digest, size, err := w.Commit()
	require.NoError(t, err)
	assert.Equal(t, int64(len(content)), size)
	assert.Equal(t, runtime.KVVersion(content), digest, "the digest is sha256:<hex> of the content")
	_, _, err = w.Commit()
	assert.ErrorIs(t, err, runtime.ErrInvalid, "committing twice")

	r, err := s.OpenBlob(digest)
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	assert.Equal(t, content, got)

	aborted, err := s.CreateBlob()
	require.NoError(t, err)
	_, err = aborted.Write([]byte("discarded"))
	require.NoError(t, err)
	require.NoError(t, aborted.Abort())
	_, err = s.OpenBlob(runtime.KVVersion([]byte("discarded")))
	assert.ErrorIs(t, err, runtime.ErrNotFound)
	tmp, err := os.ReadDir(filepath.Join(s.Dir(), "artifacts", "tmp"))
	require.NoError(t, err)
	assert.Empty(t, tmp, "no temporary files remain")

	for _, bad := range []string{"", "md5:abc", "sha256:" + strings.Repeat("G", 64), "sha256:../../state.db"} {
		_, err := s.OpenBlob(bad)
		assert.ErrorIs(t, err, runtime.ErrInvalid, "digest %q", bad)
	}
	// The database never holds blob content.
	var dbSize int64
	info, err := os.Stat(filepath.Join(s.Dir(), sqlite.DatabaseFile))
	require.NoError(t, err)
	dbSize = info.Size()
	assert.Less(t, dbSize, int64(len(content)))
}

func TestUseAfterTransactionFails(t *testing.T) {
	s := openStore(t, t.TempDir())
	var leaked runtime.Tx
	require.NoError(t, s.Transact(t.Context(), func(tx runtime.Tx) error { leaked = tx; return nil }))
	_, _, err := leaked.AcceptEvent(runtime.Envelope{Source: "s", DeliveryID: "d"})
	assert.True(t, errors.Is(err, runtime.ErrInvalid), "got %v", err)
}
