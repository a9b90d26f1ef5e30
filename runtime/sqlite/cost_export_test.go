package sqlite

import (
	"context"
	"fmt"
	"sync"
)

// WriteCost is what a piece of work cost the store: the statements its
// transactions ran (through the statement cache, so BEGIN, COMMIT and the
// deferred-sync pragmas are not among them) and the WAL frames its commits
// appended, one per page written.
type WriteCost struct {
	Statements []string
	Frames     int
}

// MeasureWrites runs fn and returns what it cost s. It checkpoints the log
// first, so the frames counted are fn's; nothing else may use s meanwhile.
// A deferred-sync flush that lands inside fn adds its commit's frames, so
// a caller asserting exact figures syncs before (Sync) and checks
// Unsynced after, as MeasureStart does.
func MeasureWrites(ctx context.Context, s *Store, fn func() error) (WriteCost, error) {
	if err := checkpoint(ctx, s, "TRUNCATE", true); err != nil {
		return WriteCost{}, err
	}
	var (
		mu   sync.Mutex
		cost WriteCost
	)
	hook := func(q string) {
		mu.Lock()
		defer mu.Unlock()
		cost.Statements = append(cost.Statements, q)
	}
	statementHook.Store(&hook)
	err := fn()
	statementHook.Store(nil)
	if err != nil {
		return WriteCost{}, err
	}
	var busy, frames, done int
	conn, err := s.lockWriter(ctx)
	if err != nil {
		return WriteCost{}, err
	}
	defer s.unlockWriter()
	if err := conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &done); err != nil {
		return WriteCost{}, err
	}
	cost.Frames = frames
	mu.Lock()
	defer mu.Unlock()
	return cost, nil
}

func checkpoint(ctx context.Context, s *Store, mode string, mustEmpty bool) error {
	var busy, frames, done int
	conn, err := s.lockWriter(ctx)
	if err != nil {
		return err
	}
	defer s.unlockWriter()
	if err := conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(`+mode+`)`).Scan(&busy, &frames, &done); err != nil {
		return err
	}
	if mustEmpty && (busy != 0 || frames != done) {
		return fmt.Errorf("checkpoint %s: busy %d, %d of %d frames", mode, busy, done, frames)
	}
	return nil
}

// MigrationsBefore is the SQL of the migrations before the n-th (1-based),
// to make a database as an older build left it.
func MigrationsBefore(n int) []string { return migrations[:n-1] }

// HoldFlush keeps the store's deferred-sync flush from running until the
// returned release is called (the flush waits for its lock), so a test can
// look at Unsynced without the flush racing it. Only TransactDeferSync
// and Close wait for it too.
func HoldFlush(s *Store) (release func()) {
	s.flushMu.Lock()
	return s.flushMu.Unlock
}

// PendingWorkQuery is PendingWork's query, whose plan a test checks.
const PendingWorkQuery = qPendingWork
