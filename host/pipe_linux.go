//go:build linux

package host

import (
	"os"
	"syscall"
)

// extensionPipeBytes is the kernel buffer of an extension's stdin and
// stdout: 1 MiB, so an artifact chunk (256 KiB, 342 KiB as base64) or a
// burst of answers crosses without the writer waiting on the reader.
const extensionPipeBytes = 1 << 20

// growPipe enlarges the pipe f is an end of to extensionPipeBytes. The
// kernel caps it (/proc/sys/fs/pipe-max-size) and an unprivileged process
// over its pipe quota keeps the default; either way the pipe still works.
func growPipe(f *os.File) {
	const setPipeSize = 1031 // F_SETPIPE_SZ
	if sc, err := f.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) {
			_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, setPipeSize, extensionPipeBytes)
		})
	}
}
