// Package hosttest holds helpers for testing the extension host: a fake
// clock that the supervisor's backoff runs on, so no test sleeps.
package hosttest

import (
	"context"
	"sync"
	"time"
)

// Clock is a fake clock: time moves only when Advance is called.
type Clock struct {
	mu        sync.Mutex
	now       time.Time
	waiters   []waiter
	requested []time.Duration
	changed   chan struct{}
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewClock returns a clock standing at start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives once the clock has advanced by d.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.requested = append(c.requested, d)
	if d <= 0 {
		ch <- c.now
	} else {
		c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch})
	}
	c.notify()
	return ch
}

func (c *Clock) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Advance moves the clock by d and fires every timer now due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
	c.notify()
}

// Requested lists every duration After was asked for, in order.
func (c *Clock) Requested() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.requested...)
}

// WaitForRequests blocks until After has been called at least n times in
// all, or ctx ends.
func (c *Clock) WaitForRequests(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		got, changed := len(c.requested), c.changed
		c.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
