package host

import "time"

// Clock is the time the supervisor's restart backoff runs on. Tests use a
// fake one (hosttest.Clock) so no test sleeps.
type Clock interface {
	Now() time.Time
	// After sends the time once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// The restart backoff: it starts at BackoffMin, doubles up to BackoffMax,
// and starts over after a process stayed up for BackoffReset.
const (
	BackoffMin   = 100 * time.Millisecond
	BackoffMax   = 30 * time.Second
	BackoffReset = time.Minute
)

// nextBackoff is the delay after d.
func nextBackoff(d time.Duration) time.Duration {
	if d < BackoffMin {
		return BackoffMin
	}
	return min(2*d, BackoffMax)
}
