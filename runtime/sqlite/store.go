package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/open-conduit/open-conduit/runtime"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DatabaseFile is the database's file name inside a state directory.
const DatabaseFile = "state.db"

// busyTimeout bounds how long a connection waits for a lock another
// process holds. Within this process the single writer never waits on
// SQLite's lock.
const busyTimeout = 10 * time.Second

// readConns is the size of the read pool.
const readConns = 4

// writerCacheKiB is the writer connection's page cache.
const writerCacheKiB = 32 << 10

// Store is the SQLite runtime.Store. It also serves artifact blobs
// (runtime.BlobStore). It is safe for concurrent use.
type Store struct {
	dir    string
	writer *sql.DB // one connection: the single writer
	reader *sql.DB // query-only connections for View
	wstmts *stmtCache
	rstmts *stmtCache
	now    func() time.Time
	closed atomic.Bool
}

var (
	_ runtime.Store     = (*Store)(nil)
	_ runtime.BlobStore = (*Store)(nil)
)

// Option configures Open.
type Option func(*Store)

// WithClock sets the clock that stamps records (accepted_at, updated_at
// and the like). The default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// Open opens (creating if needed) the store in the state directory dir and
// migrates its schema forward.
func Open(dir string, opts ...Option) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("sqlite: open: %w: empty state directory", runtime.ErrInvalid)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	s := &Store{dir: abs, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	path := filepath.Join(abs, DatabaseFile)
	common := url.Values{}
	common.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	common.Add("_pragma", "journal_mode(WAL)")
	common.Add("_pragma", "synchronous(FULL)")
	common.Add("_pragma", "foreign_keys(ON)")

	writeQ := url.Values{}
	for k, v := range common {
		writeQ[k] = v
	}
	writeQ.Set("_txlock", "immediate")
	// A larger page cache for the one writer keeps the log's unique
	// indexes (random event IDs) in memory as the log grows.
	writeQ.Add("_pragma", fmt.Sprintf("cache_size(-%d)", writerCacheKiB))
	s.writer, err = sql.Open("sqlite", dsn(path, writeQ))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	s.writer.SetMaxOpenConns(1)
	s.writer.SetMaxIdleConns(1)
	s.writer.SetConnMaxLifetime(0)
	s.writer.SetConnMaxIdleTime(0)

	// The writer creates the file and switches it to WAL before any reader
	// connects.
	if err := s.migrate(context.Background()); err != nil {
		s.writer.Close()
		return nil, err
	}

	readQ := url.Values{}
	for k, v := range common {
		readQ[k] = v
	}
	readQ.Add("_pragma", "query_only(1)")
	s.reader, err = sql.Open("sqlite", dsn(path, readQ))
	if err != nil {
		s.writer.Close()
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	s.reader.SetMaxOpenConns(readConns)
	s.reader.SetMaxIdleConns(readConns)
	s.wstmts, s.rstmts = newStmtCache(s.writer), newStmtCache(s.reader)
	return s, nil
}

func dsn(path string, q url.Values) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Dir is the state directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.writer.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	for {
		done, err := s.migrateOne(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// migrateOne applies the next migration in its own transaction and
// reports whether the schema is current.
func (s *Store) migrateOne(ctx context.Context) (done bool, err error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("sqlite: migrate: %w", err)
	}
	defer tx.Rollback()
	var version int
	err = tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return false, fmt.Errorf("sqlite: migrate: %w", err)
		}
	case err != nil:
		return false, fmt.Errorf("sqlite: migrate: %w", err)
	}
	if version > len(migrations) {
		return false, fmt.Errorf("sqlite: database schema version %d is newer than this build's %d", version, len(migrations))
	}
	if version == len(migrations) {
		return true, tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, migrations[version]); err != nil {
		return false, fmt.Errorf("sqlite: migration %d: %w", version+1, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, version+1); err != nil {
		return false, fmt.Errorf("sqlite: migration %d: %w", version+1, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("sqlite: migration %d: %w", version+1, err)
	}
	return false, nil
}

// SchemaVersion is the number of migrations applied to the database.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.reader.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
	return v, err
}

var errClosed = errors.New("sqlite: store is closed")

// Transact implements runtime.Store.
func (s *Store) Transact(ctx context.Context, fn func(runtime.Tx) error) (err error) {
	if s.closed.Load() {
		return errClosed
	}
	// BeginTx waits for the single writer connection; the wait ends with ctx.
	sqlTx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	t := &tx{reader: reader{q: querier{ctx: ctx, tx: sqlTx, cache: s.wstmts}}, now: s.now}
	finished := false
	defer func() {
		t.q.done = true
		if !finished {
			sqlTx.Rollback()
		}
		s.wstmts.prepareLater()
	}()
	if err := fn(t); err != nil {
		return err
	}
	t.q.done = true
	if err := ctx.Err(); err != nil {
		return err
	}
	finished = true
	if err := sqlTx.Commit(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}

// View implements runtime.Store.
func (s *Store) View(ctx context.Context, fn func(runtime.ReadTx) error) error {
	if s.closed.Load() {
		return errClosed
	}
	sqlTx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("sqlite: begin read: %w", err)
	}
	r := &reader{q: querier{ctx: ctx, tx: sqlTx, cache: s.rstmts}}
	defer func() {
		r.q.done = true
		sqlTx.Rollback()
		s.rstmts.prepareLater()
	}()
	if err := fn(r); err != nil {
		return err
	}
	return ctx.Err()
}

// Check runs SQLite's integrity check and returns an error unless the
// database is intact.
func (s *Store) Check(ctx context.Context) error {
	rows, err := s.reader.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return fmt.Errorf("sqlite: integrity check: %w", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("sqlite: integrity check: %w", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: integrity check: %w", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("sqlite: integrity check failed: %q", problems)
	}
	return nil
}

// Close implements runtime.Store. It waits for running transactions.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.wstmts.close()
	s.rstmts.close()
	return errors.Join(s.reader.Close(), s.writer.Close())
}
