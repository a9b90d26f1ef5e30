//go:build unix

package procwatch

import (
	"context"
	"errors"
	"syscall"
	"time"
)

// exitPollInterval is how often pollExit and WaitGroupGone look again.
const exitPollInterval = 20 * time.Millisecond

// pollExit waits for pid to exit by checking it at an interval. It is
// used only where the OS gives no event for a process that is not a
// child: systems without pidfd.
func pollExit(ctx context.Context, pid int) error {
	t := time.NewTicker(exitPollInterval)
	defer t.Stop()
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || !Running(pid, 0) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// WaitGroupGone waits until no process of group pgid is left, or ctx
// ends. No OS event says a process group has emptied, so this checks at
// an interval, bounded by ctx's deadline.
func WaitGroupGone(ctx context.Context, pgid int) bool {
	t := time.NewTicker(exitPollInterval)
	defer t.Stop()
	for {
		if !GroupAlive(pgid) {
			return true
		}
		select {
		case <-ctx.Done():
			return !GroupAlive(pgid)
		case <-t.C:
		}
	}
}
