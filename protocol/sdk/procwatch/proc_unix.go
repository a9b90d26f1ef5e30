//go:build unix

package procwatch

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// GroupAlive reports whether any process of the process group pgid is
// still running. A zombie (exited, waiting for its parent to reap it)
// runs nothing and counts as gone.
func GroupAlive(pgid int) bool { return GroupRunning(pgid) > 0 }

// GroupRunning counts the processes of group pgid that still run, zombies
// not counted. Where /proc is not available zombies cannot be told apart:
// a group the kernel still signals counts as one.
func GroupRunning(pgid int) int {
	err := syscall.Kill(-pgid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return 0
	}
	members, ok := groupMembers(pgid)
	if !ok {
		return 1
	}
	return members
}

// groupMembers counts the processes of group pgid that are not zombies,
// from /proc; ok is false where /proc is not available.
func groupMembers(pgid int) (n int, ok bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := procStat(pid)
		if ok && st.pgrp == pgid && st.state != "Z" && st.state != "X" {
			n++
		}
	}
	return n, true
}

// stat is what this package reads of /proc/<pid>/stat.
type stat struct {
	state     string
	pgrp      int
	startTime uint64 // in clock ticks after boot: with the pid, the process's identity
}

func procStat(pid int) (stat, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	// The command name is in parentheses and may hold spaces; the fields
	// after it are space-separated, starting with field 3 (state).
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return stat{}, false
	}
	pgrp, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return stat{}, false
	}
	return stat{state: f[0], pgrp: pgrp, startTime: start}, true
}

// Identity is the start time of pid, so a recorded job is never
// confused with a later process that reuses its pid; 0 when unknown.
func Identity(pid int) uint64 {
	st, ok := procStat(pid)
	if !ok {
		return 0
	}
	return st.startTime
}

// Running reports whether pid is the process started at start (when
// start is known) and has not exited.
func Running(pid int, start uint64) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	st, ok := procStat(pid)
	if !ok {
		return start == 0 // no /proc: the signal check is all there is
	}
	if start != 0 && st.startTime != start {
		return false
	}
	return st.state != "Z" && st.state != "X"
}
