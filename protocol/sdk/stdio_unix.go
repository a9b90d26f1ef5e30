//go:build unix

package sdk

import (
	"os"
	"syscall"
)

// keptStdio holds the *os.File values pollable replaced: each would close
// its descriptor when collected, under the new File still using it.
var keptStdio []*os.File

// pollable returns a File on f's descriptor that the runtime's poller
// serves, when f is a pipe or a socket (the poller takes nothing else);
// otherwise f itself. The descriptor is put in non-blocking mode.
func pollable(f *os.File) *os.File {
	var st syscall.Stat_t
	fd := int(f.Fd()) // Fd leaves the descriptor in blocking mode
	if syscall.Fstat(fd, &st) != nil {
		return f
	}
	if mode := st.Mode & syscall.S_IFMT; mode != syscall.S_IFIFO && mode != syscall.S_IFSOCK {
		return f
	}
	if syscall.SetNonblock(fd, true) != nil {
		return f
	}
	keptStdio = append(keptStdio, f)
	return os.NewFile(uintptr(fd), f.Name()) // non-blocking: registered with the poller
}
