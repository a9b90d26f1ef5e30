package schedule

import (
	"context"
	"errors"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// reentrantBackoff is how long each retry of a call the host refused as
// reentrant_call waits: the host refuses every call of the extension while
// one of its in-transaction calls is outstanding (recurrence.next when a
// job's timer fires, work_kind.trigger when a job's run starts), and those
// end within protocol.InTransactionDeadline, which the waits outlast.
var reentrantBackoff = []time.Duration{10 * time.Millisecond, 40 * time.Millisecond, 100 * time.Millisecond,
	200 * time.Millisecond, 400 * time.Millisecond}

// retryReentrant makes call, again after each wait of reentrantBackoff
// while the host answers reentrant_call; any other answer, or the last,
// is returned as it is.
func retryReentrant[T any](ctx context.Context, call func() (T, error)) (T, error) {
	v, err := call()
	for _, wait := range reentrantBackoff {
		if !errors.Is(err, protocol.ErrReentrantCall) {
			return v, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		v, err = call()
	}
	return v, err
}
