//go:build !linux

package drill

import (
	"fmt"
	"syscall"
	"time"
)

// waitGone returns once the process pid has exited, or an error after
// within. Without pidfds it asks the kernel every few milliseconds; the
// drills are meant for Linux, where waitGone waits on a pidfd.
func waitGone(pid int, within time.Duration) error {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d still runs after %v", pid, within)
		}
		<-tick.C
	}
	return nil
}
