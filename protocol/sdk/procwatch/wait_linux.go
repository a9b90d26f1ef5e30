//go:build linux

package procwatch

import (
	"context"
	"errors"
	"syscall"
)

// sysPidfdOpen is pidfd_open(2), the same number on every Linux
// architecture.
const sysPidfdOpen = 434

// WaitExit returns once the process pid (not necessarily a child of this
// process) has exited, or with ctx's error. It waits on a pidfd, which
// the kernel makes readable when the process exits, together with a pipe
// that ctx's end writes to: no polling.
func WaitExit(ctx context.Context, pid int) error {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ESRCH {
		return nil
	}
	if errno != 0 {
		return pollExit(ctx, pid)
	}
	pidfd := int(fd)
	defer syscall.Close(pidfd)
	var wake [2]int
	if err := syscall.Pipe2(wake[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return err
	}
	defer syscall.Close(wake[0])
	defer syscall.Close(wake[1])
	stop := context.AfterFunc(ctx, func() { syscall.Write(wake[1], []byte{1}) })
	defer stop()
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	defer syscall.Close(ep)
	for _, f := range []int{pidfd, wake[0]} {
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, f, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(f)}); err != nil {
			return err
		}
	}
	events := make([]syscall.EpollEvent, 2)
	for {
		n, err := syscall.EpollWait(ep, events, -1)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		for _, ev := range events[:n] {
			if int(ev.Fd) == pidfd {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
