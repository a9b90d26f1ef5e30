package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
)

// stmtCache keeps prepared statements of one pool (the readers') or one
// connection (the writer's), so a transaction does not parse its SQL again
// each time. A statement first met inside a transaction runs unprepared
// and is prepared after that transaction ends: a reader's preparing needs
// a free connection, and a flag pragma would take effect when prepared.
type stmtCache struct {
	db      preparer
	mu      sync.RWMutex
	stmts   map[string]*sql.Stmt
	pending map[string]bool
	closed  bool

	preparing atomic.Bool
	wg        sync.WaitGroup // the background preparation, so close can wait
}

// preparer is a *sql.DB or a *sql.Conn.
type preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

func newStmtCache(db preparer) *stmtCache {
	return &stmtCache{db: db, stmts: map[string]*sql.Stmt{}, pending: map[string]bool{}}
}

// statementHook, when set (by a test), is told of every statement a
// transaction runs: each passes through get.
var statementHook atomic.Pointer[func(query string)]

// get returns the prepared statement for query, or nil and remembers query
// for prepareAll.
func (c *stmtCache) get(query string) *sql.Stmt {
	if h := statementHook.Load(); h != nil {
		(*h)(query)
	}
	c.mu.RLock()
	st := c.stmts[query]
	c.mu.RUnlock()
	if st == nil {
		c.mu.Lock()
		c.pending[query] = true
		c.mu.Unlock()
	}
	return st
}

// prepareLater prepares the statements met so far in the background, so the
// transaction that met them returns without waiting for a connection. It
// must not be called while the caller holds a transaction of the pool.
func (c *stmtCache) prepareLater() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 || c.closed || !c.preparing.CompareAndSwap(false, true) {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.preparing.Store(false)
		c.prepareAll(context.Background())
	}()
}

// prepareAll prepares the statements met since the last call.
func (c *stmtCache) prepareAll(ctx context.Context) {
	c.mu.Lock()
	if len(c.pending) == 0 || c.closed {
		c.mu.Unlock()
		return
	}
	var queries []string
	for q := range c.pending {
		queries = append(queries, q)
	}
	clear(c.pending)
	c.mu.Unlock()
	for _, q := range queries {
		c.mu.RLock()
		closed := c.closed
		c.mu.RUnlock()
		if closed {
			return
		}
		st, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			continue // it runs unprepared, as before
		}
		c.mu.Lock()
		if c.stmts[q] != nil || c.closed {
			st.Close()
		} else {
			c.stmts[q] = st
		}
		c.mu.Unlock()
	}
}

// close waits for a background preparation, so no connection is opened
// after the store closes, and closes the statements.
func (c *stmtCache) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		st.Close()
	}
	clear(c.stmts)
}
