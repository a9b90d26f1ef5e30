package jsonrpc

import (
	"context"
	"sync"
	"time"
)

// requestCtx is the context a request's handler gets. It ends when the
// peer sends $/cancel for the request, when the connection ends, or once
// the handler has returned. It is what context.WithCancel(conn.ctx) was,
// made lazily: most handlers answer without asking for Done, and for them
// a cancelCtx and its registration among the connection context's
// children (a lock, a map insert, a map delete) were most of what a
// request's context cost. Done makes the channel, and ties it to the
// connection's end, on first use.
type requestCtx struct {
	conn *Conn
	// eager is set when the reader started the handler (Options.Eager),
	// before it runs: its calls with this context may read their answers
	// themselves (Conn.takeReadingFor).
	eager *eagerRun

	mu   sync.Mutex
	err  error         // set once: why the request's context ended
	done chan struct{} // made by the first Done
	// stopConn unregisters the watch on the connection's end that the
	// first Done set up.
	stopConn func() bool
	// afters are the functions context.AfterFunc (and contexts derived
	// from this one) registered, keyed so their stop can remove them.
	afters map[*afterFunc]struct{}
}

type afterFunc struct{ f func() }

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func newRequestCtx(c *Conn) *requestCtx { return &requestCtx{conn: c} }

// Deadline: a request's context has none of its own.
func (r *requestCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

// Done returns a channel closed when the request's context ends.
func (r *requestCtx) Done() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		return r.done
	}
	if r.err == nil {
		r.err = r.conn.ctx.Err()
	}
	if r.err != nil {
		r.done = closedChan
		return r.done
	}
	r.done = make(chan struct{})
	r.stopConn = context.AfterFunc(r.conn.ctx, func() { r.end(context.Canceled) })
	return r.done
}

// Err is nil until the context ends, then context.Canceled.
func (r *requestCtx) Err() error {
	r.mu.Lock()
	err := r.err
	r.mu.Unlock()
	if err != nil {
		return err
	}
	// Without a Done channel nothing watches the connection: ask it.
	return r.conn.ctx.Err()
}

// Value carries the Conn's values (ConnFromContext, answered here
// without walking the Conn's context chain).
func (r *requestCtx) Value(key any) any {
	if _, ok := key.(connKey); ok {
		return r.conn
	}
	return r.conn.ctx.Value(key)
}

// AfterFunc lets context.AfterFunc, and context.WithCancel on this
// context, wait for its end without a goroutine of their own (the context
// package uses such a method of a parent when it has one).
func (r *requestCtx) AfterFunc(f func()) (stop func() bool) {
	r.Done() // the connection's end must reach f too
	a := &afterFunc{f: f}
	r.mu.Lock()
	if r.err != nil {
		r.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	if r.afters == nil {
		r.afters = map[*afterFunc]struct{}{}
	}
	r.afters[a] = struct{}{}
	r.mu.Unlock()
	return func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, ok := r.afters[a]; !ok {
			return false
		}
		delete(r.afters, a)
		return true
	}
}

// end ends the context with err, once.
func (r *requestCtx) end(err error) {
	r.mu.Lock()
	if r.err != nil {
		// Ended already (a closedChan Done means the connection had).
		r.mu.Unlock()
		return
	}
	r.err = err
	if r.done != nil {
		close(r.done)
	}
	afters, stop := r.afters, r.stopConn
	r.afters, r.stopConn = nil, nil
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
	for a := range afters {
		go a.f()
	}
}

// cancel ends the context ($/cancel, or the handler returned).
func (r *requestCtx) cancel() { r.end(context.Canceled) }

var _ context.Context = (*requestCtx)(nil)
