//go:build linux

package main

import (
	"os"
	"syscall"
)

// growPipe enlarges a pipe's kernel buffer to 1 MiB, as the host does for
// its extensions' stdio, so a 64 KiB chunk (87 KiB as base64) crosses in one
// write. Failure keeps the default.
func growPipe(f *os.File) {
	const setPipeSize = 1031 // F_SETPIPE_SZ
	if sc, err := f.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) {
			_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, setPipeSize, 1<<20)
		})
	}
}
