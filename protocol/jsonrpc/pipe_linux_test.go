package jsonrpc_test

import (
	"os"
	"syscall"
)

// growPipe enlarges a pipe's kernel buffer so a whole 64 KiB chunk (87 KiB
// as base64) crosses in one write, as a host on Linux may do for its
// extensions' stdio. Failure leaves the default size.
func growPipe(f *os.File) {
	const setPipeSize = 1031 // F_SETPIPE_SZ
	if sc, err := f.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) {
			_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, setPipeSize, 1<<20)
		})
	}
}
