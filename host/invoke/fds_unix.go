//go:build unix

package invoke

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
)

// closeInheritedOnExec marks every descriptor of this process above the
// standard three close-on-exec, so the process starts with its three pipes
// and nothing else. Go opens its own descriptors close-on-exec; this
// catches one a library or a parent left inheritable.
func closeInheritedOnExec() error {
	dir := "/proc/self/fd"
	if runtime.GOOS != "linux" {
		dir = "/dev/fd"
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		// A descriptor gone since the listing (the listing's own) is no
		// matter.
		syscall.CloseOnExec(fd)
	}
	return nil
}
