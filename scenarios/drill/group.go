package drill

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdGroup: group kill FILE — SIGKILL to the process group whose id FILE
// holds (a job writes its own there), returning once every process the
// group had has exited. A drill uses it to make a detached job vanish
// while no executor process watches it, so its recovery metadata names a
// group that is gone.
func cmdGroup(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "group")
	s := state(ts)
	if len(args) != 2 || args[0] != "kill" {
		ts.Fatalf("usage: group kill FILE (FILE holds a process group id)")
	}
	text := strings.TrimSpace(ts.ReadFile(args[1]))
	pgid, err := strconv.Atoi(text)
	if err != nil || pgid <= 1 {
		ts.Fatalf("group kill: %s holds %q, not a process group id", args[1], text)
	}
	if pgid == os.Getpid() || pgid == syscall.Getpgrp() {
		ts.Fatalf("group kill: %s names this drill's own process group %d", args[1], pgid)
	}
	members := groupMembers(pgid)
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		ts.Fatalf("group kill: process group %d: %v (was it running?)", pgid, err)
	}
	for _, pid := range members {
		ts.Check(waitGone(pid, s.within))
	}
	s.progress("process group %d killed (%d processes)", pgid, len(members))
	fmt.Fprintf(ts.Stdout(), "killed process group %d (%d processes)\n", pgid, len(members))
}
