package sqlite

import (
	"context"
	"strings"

	"github.com/open-conduit/open-conduit/runtime"
)

// ExecInTx runs one statement in a transaction of this store, for the
// tests that need one no Tx method makes. It runs unprepared, outside the
// statement cache: the cache prepares what it meets on the writer after the
// transaction, and a flag PRAGMA (defer_foreign_keys) takes effect when it
// is prepared, so it would leak into the writer's next transaction.
func ExecInTx(rt runtime.Tx, query string, args ...any) error {
	q := &rt.(*tx).q
	if err := q.check(); err != nil {
		return err
	}
	if _, err := q.conn.ExecContext(q.run, query, args...); err != nil {
		return err
	}
	q.wrote = true
	return nil
}

// WriterInTransaction reports whether the idle writer connection is still
// inside a transaction: a BEGIN on it is refused then.
func WriterInTransaction(s *Store) (bool, error) {
	ctx := context.Background()
	conn, err := s.lockWriter(ctx)
	if err != nil {
		return false, err
	}
	defer s.unlockWriter()
	if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
		if strings.Contains(err.Error(), "within a transaction") {
			return true, nil
		}
		return false, err
	}
	_, err = conn.ExecContext(ctx, `ROLLBACK`)
	return false, err
}
