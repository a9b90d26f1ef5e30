package jsonrpc

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// idleConn is a Conn over a stream that never delivers anything.
func idleConn(t *testing.T) *Conn {
	r, w := io.Pipe()
	c := NewConn(r, io.Discard, nil, nil)
	t.Cleanup(func() { _ = c.Close(); _ = w.Close() })
	return c
}

// The lazily made request context behaves as context.WithCancel of the
// connection's context did, whichever way it ends and whether or not Done
// was asked for before.
func TestRequestContextEndsAsACancelCtx(t *testing.T) {
	ends := map[string]func(c *Conn, rc *requestCtx){
		"cancel":          func(_ *Conn, rc *requestCtx) { rc.cancel() },
		"connection ends": func(c *Conn, _ *requestCtx) { _ = c.Close() },
	}
	for name, end := range ends {
		for _, doneFirst := range []bool{true, false} {
			t.Run(name, func(t *testing.T) {
				c := idleConn(t)
				rc := newRequestCtx(c)
				assert.Same(t, c, ConnFromContext(rc))
				require.NoError(t, rc.Err())
				derived, stop := context.WithCancel(rc)
				defer stop()
				var done <-chan struct{}
				if doneFirst {
					done = rc.Done()
					select {
					case <-done:
						t.Fatal("Done closed before the context ended")
					default:
					}
				}
				after := make(chan struct{})
				context.AfterFunc(rc, func() { close(after) })
				end(c, rc)
				if !doneFirst {
					done = rc.Done()
				}
				<-done
				<-derived.Done()
				<-after
				assert.ErrorIs(t, rc.Err(), context.Canceled)
				assert.ErrorIs(t, derived.Err(), context.Canceled)
				// After the end, a new AfterFunc still runs.
				late := make(chan struct{})
				context.AfterFunc(rc, func() { close(late) })
				<-late
			})
		}
	}
}

// An AfterFunc stopped before the end never runs; a derived context
// cancelled on its own leaves the request's context alone.
func TestRequestContextStopAndChildCancel(t *testing.T) {
	c := idleConn(t)
	rc := newRequestCtx(c)
	stop := context.AfterFunc(rc, func() { t.Error("a stopped AfterFunc ran") })
	assert.True(t, stop())
	assert.False(t, stop(), "a second stop reports it did nothing")
	child, cancel := context.WithCancel(rc)
	cancel()
	<-child.Done()
	assert.NoError(t, rc.Err(), "a child's cancel reached its parent")
	rc.cancel()
	<-rc.Done()
	assert.Empty(t, rc.afters, "the stopped AfterFunc and the cancelled child were not unregistered")
}
