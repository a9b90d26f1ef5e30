//go:build linux

package drill

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// sysPidfdOpen is pidfd_open(2), the same number on every Linux
// architecture.
const sysPidfdOpen = 434

// waitGone returns once the process pid (not a child of this one) has
// exited, or an error after within. It waits on a pidfd, which the kernel
// makes readable when the process exits: no polling, no sleep.
func waitGone(pid int, within time.Duration) error {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ESRCH {
		return nil
	}
	if errno != 0 {
		return fmt.Errorf("pidfd_open %d: %w", pid, errno)
	}
	pidfd := int(fd)
	defer syscall.Close(pidfd)
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	defer syscall.Close(ep)
	if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, pidfd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(pidfd)}); err != nil {
		return err
	}
	deadline := time.Now().Add(within)
	events := make([]syscall.EpollEvent, 1)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("process %d still runs after %v", pid, within)
		}
		n, err := syscall.EpollWait(ep, events, int(left/time.Millisecond)+1)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
}
