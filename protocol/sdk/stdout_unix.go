//go:build unix

package sdk

import (
	"os"
	"syscall"
)

// stdoutToStderr returns a file writing to the standard error: a
// duplicate of its descriptor, so code that closes os.Stdout closes
// neither the protocol's stream nor the real stderr.
func stdoutToStderr() *os.File {
	fd, err := syscall.Dup(int(os.Stderr.Fd()))
	if err != nil {
		return os.Stderr
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "/dev/stderr")
}
