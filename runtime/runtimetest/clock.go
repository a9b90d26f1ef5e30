// Package runtimetest holds test helpers for code that drives the runtime:
// a fake clock whose time moves only when a test advances it.
package runtimetest

import (
	"slices"
	"sync"
	"time"
)

// FakeClock is a runtime.Clock whose time moves only through Advance and
// Set. Timers registered with AfterFunc fire during Advance, in due order
// (ties in registration order), each in the goroutine calling Advance, so a
// test knows every due callback has run when Advance returns.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*fakeTimer
}

type fakeTimer struct {
	due  time.Time
	seq  int
	f    func()
	done bool
}

// NewFakeClock returns a fake clock standing at start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start}
}

// Now implements runtime.Clock.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements runtime.Clock. A non-positive d fires at the next
// Advance (of any length, including zero).
func (c *FakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{due: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.done {
			return false
		}
		t.done = true
		c.remove(t)
		return true
	}
}

func (c *FakeClock) remove(t *fakeTimer) {
	c.timers = slices.DeleteFunc(c.timers, func(o *fakeTimer) bool { return o == t })
}

// Advance moves the clock forward by d, firing every timer that falls due
// on the way at its own due time, including timers that callbacks register
// within the window.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	c.advanceTo(target)
}

// Set moves the clock to t (never backwards), firing due timers like
// Advance.
func (c *FakeClock) Set(t time.Time) {
	c.advanceTo(t)
}

func (c *FakeClock) advanceTo(target time.Time) {
	for {
		c.mu.Lock()
		var next *fakeTimer
		for _, t := range c.timers {
			if t.due.After(target) {
				continue
			}
			if next == nil || t.due.Before(next.due) || (t.due.Equal(next.due) && t.seq < next.seq) {
				next = t
			}
		}
		if next == nil {
			if target.After(c.now) {
				c.now = target
			}
			c.mu.Unlock()
			return
		}
		if next.due.After(c.now) {
			c.now = next.due
		}
		next.done = true
		c.remove(next)
		c.mu.Unlock()
		next.f()
	}
}

// Pending is the number of timers registered and not yet fired or stopped.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
