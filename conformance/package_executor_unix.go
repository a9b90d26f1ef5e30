//go:build unix

package conformance

import (
	"fmt"
	"syscall"

	"github.com/open-conduit/open-conduit/protocol/sdk/procwatch"
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

// groupRunning counts the processes of group pgid that still run,
// zombies not counted (procwatch.GroupRunning).
func groupRunning(pgid int) (int, error) { return procwatch.GroupRunning(pgid), nil }

// killGroup ends what is left of a group certification observed.
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }
