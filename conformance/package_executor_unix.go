//go:build unix

package conformance

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processGroupOf is the process group of a running process.
func processGroupOf(pid int) (int, error) {
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	if pgid == syscall.Getpgrp() {
		return 0, fmt.Errorf("process %d runs in certification's own process group %d, not one of its run's own", pid, pgid)
	}
	return pgid, nil
}

// groupRunning counts the processes of group pgid that still run: a
// zombie (exited, not yet reaped by whoever inherited it) runs nothing and
// is not counted. Without /proc a zombie cannot be told apart, so any
// member the kernel still signals counts.
func groupRunning(pgid int) (int, error) {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return 0, nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 1, nil
	}
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended since the listing
		}
		// The command name is in parentheses and may hold spaces; state
		// and process group follow it.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid && f[0] != "Z" && f[0] != "X" {
			n++
		}
	}
	return n, nil
}

// killGroup ends what is left of a group certification observed.
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }
