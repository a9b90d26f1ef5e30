package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// WriteCost is what a piece of work cost the store: the statements its
// transactions ran (through the statement cache, so BEGIN, COMMIT and the
// deferred-sync pragmas are not among them) and the WAL frames its commits
// appended, one per page written, and the b-trees (tables and indexes, as
// dbstat names them) those pages belong to, sorted, each once.
type WriteCost struct {
	Statements []string
	Frames     int
	Btrees     []string
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
	if cost.Btrees, err = walBtrees(ctx, s, conn); err != nil {
		return WriteCost{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	return cost, nil
}

// walBtrees names the b-trees of the pages the log's frames hold (the
// frames of the log's current salt; a page no b-tree owns is "free").
func walBtrees(ctx context.Context, s *Store, conn *sql.Conn) ([]string, error) {
	wal, err := os.ReadFile(filepath.Join(s.dir, DatabaseFile+"-wal"))
	if err != nil || len(wal) < 32 {
		return nil, err
	}
	pageSize := int(binary.BigEndian.Uint32(wal[8:12]))
	salt := wal[16:24]
	pages := map[int64]bool{}
	for off := 32; off+24+pageSize <= len(wal); off += 24 + pageSize {
		if string(wal[off+8:off+16]) != string(salt) {
			break
		}
		pages[int64(binary.BigEndian.Uint32(wal[off:off+4]))] = true
	}
	rows, err := conn.QueryContext(ctx, `SELECT name, pageno FROM dbstat`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		var page int64
		if err := rows.Scan(&name, &page); err != nil {
			return nil, err
		}
		if pages[page] {
			delete(pages, page)
			names = append(names, name)
		}
	}
	if len(pages) > 0 {
		names = append(names, "free")
	}
	slices.Sort(names)
	return slices.Compact(names), rows.Err()
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
