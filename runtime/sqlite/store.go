package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	rstmts *stmtCache

	// The writer's connection is held from its first transaction to
	// Close, so a transaction runs on it without database/sql's Tx (whose
	// watcher goroutines, one per transaction and one per Rows, cost
	// several context switches a write). wsem is the right to use it:
	// wconn and wstmts (prepared on it) are read and replaced only by its
	// holder.
	wsem   chan struct{}
	wconn  *sql.Conn
	wstmts *stmtCache
	now    func() time.Time
	closed atomic.Bool

	// Deferred-sync bookkeeping: deferredGen counts deferred commits,
	// syncedGen is the count a synced commit has covered (the writer is
	// one connection, so a synced commit covers every deferred one that
	// committed before it began). flush is armed while some are not.
	deferredGen, syncedGen atomic.Int64
	flushMu                sync.Mutex
	flush                  *time.Timer

	// committedSeq is the sequence of the last Event a transaction of
	// this store accepted and went on to commit
	// (runtime.CommittedSequenceStore); seqUnknown is set for good once
	// such a commit failed, the count then ahead of the log.
	committedSeq atomic.Int64
	seqUnknown   atomic.Bool

	// activeWaits counts the active Waits, kept as committedSeq is: a
	// transaction's change to it is added just before its commit, and a
	// commit that failed after changing it leaves it unknown for good.
	// While it is known and 0, a write transaction's WaitsForKey reads
	// nothing. It is exact while this Store is the database's only writer.
	activeWaits  atomic.Int64
	waitsUnknown atomic.Bool
}

// DeferredSyncBound is how long a deferred-sync commit may stay off the
// disk when no synced commit follows it: the store then syncs it itself.
const DeferredSyncBound = 50 * time.Millisecond

var (
	_ runtime.Store     = (*Store)(nil)
	_ runtime.BlobStore = (*Store)(nil)

	_ runtime.DeferredSyncStore      = (*Store)(nil)
	_ runtime.PreAcceptStore         = (*Store)(nil)
	_ runtime.PreAcceptTx            = (*tx)(nil)
	_ runtime.CommittedSequenceStore = (*Store)(nil)
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
	s := &Store{dir: abs, now: time.Now, wsem: make(chan struct{}, 1)}
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
	var latest int64
	if err := s.writer.QueryRow(`SELECT COALESCE(MAX(sequence), 0) FROM events`).Scan(&latest); err != nil {
		s.writer.Close()
		return nil, fmt.Errorf("sqlite: open: latest sequence: %w", err)
	}
	s.committedSeq.Store(latest)
	var active int64
	if err := s.writer.QueryRow(`SELECT count(*) FROM waits INDEXED BY waits_one_active WHERE state = 'active'`).Scan(&active); err != nil {
		s.writer.Close()
		return nil, fmt.Errorf("sqlite: open: active waits: %w", err)
	}
	s.activeWaits.Store(active)

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
	s.rstmts = newStmtCache(s.reader)
	return s, nil
}

func dsn(path string, q url.Values) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Now implements runtime.PreAcceptStore: it reads the clock that stamps
// the store's records.
func (s *Store) Now() time.Time { return s.now() }

// CommittedSequence implements runtime.CommittedSequenceStore: each
// commit that accepts Events is counted just before it, while its
// transaction holds the one writer. It is exact while this Store is the
// database's only writer (the daemon's state lock keeps every other
// process off the database).
func (s *Store) CommittedSequence() (int64, bool) {
	if s.seqUnknown.Load() {
		return 0, false
	}
	return s.committedSeq.Load(), true
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

// Transact implements runtime.Store: its commit is on disk when it
// returns (synchronous=FULL).
func (s *Store) Transact(ctx context.Context, fn func(runtime.Tx) error) (err error) {
	if s.closed.Load() {
		return errClosed
	}
	conn, err := s.lockWriter(ctx)
	if err != nil {
		return err
	}
	defer s.unlockWriter()
	covers := s.deferredGen.Load() // the writer is ours: no deferred commit is under way
	var t *tx
	if err := s.run(ctx, conn, func(rt runtime.Tx) error { t = rt.(*tx); return fn(rt) }, false); err != nil {
		return err
	}
	if !t.q.wrote {
		return nil // a commit that changed nothing wrote and synced nothing
	}
	for {
		synced := s.syncedGen.Load()
		if synced >= covers || s.syncedGen.CompareAndSwap(synced, covers) {
			return nil
		}
	}
}

// TransactDeferSync implements runtime.DeferredSyncStore. The commit runs
// with synchronous=NORMAL, which in WAL mode writes the log without an
// fsync: a killed process loses nothing (the writes are in the kernel),
// and the next synced commit's fsync of the log covers it, since the log
// is appended in commit order and its checksums chain, so recovery after
// a machine crash keeps a prefix of the commits. The connection goes back
// to FULL before any other transaction can have it.
func (s *Store) TransactDeferSync(ctx context.Context, fn func(runtime.Tx) error) error {
	if s.closed.Load() {
		return errClosed
	}
	conn, err := s.lockWriter(ctx)
	if err != nil {
		return err
	}
	defer s.unlockWriter()
	// The pragmas run without ctx: once the connection is ours, it must go
	// back to FULL whatever happens to the caller. They run unprepared: a
	// pragma's setting takes effect when it is prepared.
	if _, err := conn.ExecContext(context.Background(), `PRAGMA synchronous = NORMAL`); err != nil {
		return fmt.Errorf("sqlite: deferred sync: %w", err)
	}
	runErr := s.run(ctx, conn, fn, true)
	if conn != s.wconn {
		return runErr // run dropped the writer: the next is opened with FULL
	}
	if _, err := conn.ExecContext(context.Background(), `PRAGMA synchronous = FULL`); err != nil {
		// A writer that might commit unsynced is closed, not reused: the
		// pool opens a new one with the DSN's FULL.
		s.dropWriter()
		return errors.Join(runErr, fmt.Errorf("sqlite: deferred sync: restoring synchronous=FULL: %w", err))
	}
	if runErr != nil {
		return runErr
	}
	s.deferredGen.Add(1)
	s.armFlush()
	return nil
}

// lockWriter waits, until ctx ends, for the writer connection, and opens
// it if it is not open. unlockWriter gives it back.
func (s *Store) lockWriter(ctx context.Context) (*sql.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case s.wsem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if s.closed.Load() {
		<-s.wsem
		return nil, errClosed
	}
	if s.wconn == nil {
		conn, err := s.writer.Conn(ctx)
		if err != nil {
			<-s.wsem
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("sqlite: begin: %w", err)
		}
		s.wconn, s.wstmts = conn, newStmtCache(conn)
	}
	return s.wconn, nil
}

func (s *Store) unlockWriter() { <-s.wsem }

// dropWriter closes the writer connection, for one that cannot be trusted
// (left in a transaction, or perhaps committing unsynced): the next
// transaction opens a new one with the DSN's settings. Its caller holds it.
func (s *Store) dropWriter() {
	if s.wconn == nil {
		return
	}
	s.wstmts.close()
	s.wconn.Raw(func(any) error { return driver.ErrBadConn })
	s.wconn.Close()
	s.wconn, s.wstmts = nil, nil
}

// rollback ends the writer's transaction, if one is open.
func (s *Store) rollback(conn *sql.Conn) {
	_, err := conn.ExecContext(context.Background(), `ROLLBACK`)
	if err != nil && !strings.Contains(err.Error(), "no transaction is active") {
		s.dropWriter()
	}
}

// run runs fn in a transaction on conn, the writer (its caller holds it),
// and commits it.
//
// BEGIN IMMEDIATE runs with ctx, so a wait for another process's lock ends
// with it. The statements after it run with a context that is never done,
// so neither database/sql nor the driver starts a goroutine per statement
// to watch it; ctx is checked before each statement and before the
// commit, so a cancel still stops fn's next statement and the commit. It
// no longer interrupts a statement under way: a write transaction's
// statements are short (their pages are bounded), and holding the write
// lock, none waits for a lock.
func (s *Store) run(ctx context.Context, conn *sql.Conn, fn func(runtime.Tx) error, deferSync bool) error {
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		s.rollback(conn) // in case it was interrupted once under way
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	t := &tx{reader: reader{q: querier{ctx: ctx, run: context.WithoutCancel(ctx), conn: conn, cache: s.wstmts}},
		now: s.now, deferSync: deferSync, activeWaits: s.activeWaits.Load()}
	if s.waitsUnknown.Load() {
		t.activeWaits = -1
	}
	finished := false
	defer func() {
		t.q.done = true
		if !finished {
			s.rollback(conn)
		}
		if s.wstmts != nil {
			s.wstmts.prepareAll(context.Background()) // on conn, which is still ours
		}
	}()
	if err := fn(t); err != nil {
		return err
	}
	if err := t.flushChanges(); err != nil {
		return err
	}
	t.q.done = true
	if t.refused {
		return errDeferredChange // fn went on after the refusal: commit nothing
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	finished = true
	if t.acceptedSeq > 0 {
		// Counted before the commit, while this transaction still holds
		// the writer: the count is then never behind a committed Event,
		// and exact for the next transaction. A commit that fails leaves
		// it ahead, so the store stops vouching.
		s.committedSeq.Store(t.acceptedSeq)
	}
	if t.waitDelta != 0 {
		s.activeWaits.Add(t.waitDelta) // counted as committedSeq is
	}
	// A COMMIT the database refuses (a deferred foreign key, a busy lock)
	// leaves SQLite inside the transaction, which would refuse every later
	// BEGIN: it is rolled back (TestAFailedCommitLeavesTheWriterUsable).
	if _, err := conn.ExecContext(context.Background(), `COMMIT`); err != nil {
		s.rollback(conn)
		if t.acceptedSeq > 0 {
			s.seqUnknown.Store(true)
		}
		if t.waitDelta != 0 {
			s.waitsUnknown.Store(true)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}

// Unsynced reports whether a deferred-sync commit is not yet covered by a
// synced one.
func (s *Store) Unsynced() bool { return s.deferredGen.Load() > s.syncedGen.Load() }

// armFlush makes sure a sync follows within DeferredSyncBound.
func (s *Store) armFlush() {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if s.flush == nil && !s.closed.Load() {
		s.flush = time.AfterFunc(DeferredSyncBound, func() {
			s.flushMu.Lock()
			s.flush = nil
			s.flushMu.Unlock()
			if err := s.Sync(context.Background()); err != nil && !s.closed.Load() {
				s.armFlush() // try again; nothing else would
			}
		})
	}
}

// Sync puts every deferred-sync commit so far on disk: a no-op when a
// synced commit has covered them, else one synced commit of its own.
func (s *Store) Sync(ctx context.Context) error {
	if !s.Unsynced() {
		return nil
	}
	// A write that changes nothing still writes its page, so its commit
	// is an fsync of the log.
	return s.Transact(ctx, func(rt runtime.Tx) error {
		_, err := rt.(*tx).q.exec(`UPDATE schema_version SET version = version`)
		return err
	})
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
	// Deferred commits go to disk before the store closes.
	syncErr := s.Sync(context.Background())
	if s.closed.Swap(true) {
		return nil
	}
	s.flushMu.Lock()
	if s.flush != nil {
		s.flush.Stop()
		s.flush = nil
	}
	s.flushMu.Unlock()
	s.wsem <- struct{}{} // waits for a running transaction; later ones find the store closed
	if s.wconn != nil {
		s.wstmts.close()
		s.wconn.Close()
		s.wconn, s.wstmts = nil, nil
	}
	<-s.wsem
	s.rstmts.close()
	return errors.Join(syncErr, s.reader.Close(), s.writer.Close())
}
