package sqlite

import "github.com/open-conduit/open-conduit/runtime"

// ExecInTx runs one statement in a transaction of this store, for the
// tests that need one no Tx method makes.
func ExecInTx(rt runtime.Tx, query string, args ...any) error {
	_, err := rt.(*tx).q.exec(query, args...)
	return err
}
