package runtime

import "time"

// Clock is the engine's only source of time. Every timer, backoff and
// timestamp the engine computes goes through it, so tests drive time with a
// fake (runtimetest.FakeClock) and never sleep.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, unless the
	// returned stop function is called first (it reports whether it
	// stopped the call).
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc implements Clock.
func (SystemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
