package runtimetest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/runtimetest"
)

var _ runtime.Clock = (*runtimetest.FakeClock)(nil)

func TestFakeClockFiresInDueOrder(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := runtimetest.NewFakeClock(start)
	var fired []string
	var at []time.Time
	add := func(name string, d time.Duration) func() bool {
		return c.AfterFunc(d, func() {
			fired = append(fired, name)
			at = append(at, c.Now())
		})
	}
	add("b", 2*time.Second)
	add("a", time.Second)
	add("a2", time.Second)
	stop := add("never", 1500*time.Millisecond)
	assert.True(t, stop())
	assert.False(t, stop(), "stopping twice")
	c.AfterFunc(3*time.Second, func() {
		fired = append(fired, "c")
		// A timer registered by a callback within the window fires too.
		c.AfterFunc(time.Second, func() { fired = append(fired, "d") })
	})

	c.Advance(time.Second / 2)
	assert.Empty(t, fired)
	c.Advance(10 * time.Second)
	assert.Equal(t, []string{"a", "a2", "b", "c", "d"}, fired)
	assert.Equal(t, start.Add(time.Second), at[0], "each fires at its own due time")
	assert.Equal(t, start.Add(10*time.Second+time.Second/2), c.Now())
	assert.Zero(t, c.Pending())

	c.Set(start) // never backwards
	assert.Equal(t, start.Add(10*time.Second+time.Second/2), c.Now())
}
