package drill

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// dies starts serve with args and waits, ready or not, for it to die of
// its own SIGKILL: a kill point armed through args that the daemon passes
// while it starts (a KV migration's batches, its layout record) kills it
// before its ready line, which daemon start takes as a failure.
func (s *script) dies(args []string) error {
	s.dying = true
	err := s.start(args)
	s.dying = false
	if err != nil || s.d == nil {
		return err // failed, or died before it was ready
	}
	// Ready first: the point is still ahead of it.
	d := s.d
	select {
	case <-d.exited:
	case <-time.After(s.within):
		return fmt.Errorf("the daemon still runs %v after it was ready, not killed by its kill point; its log:\n%s", s.within, s.logTail())
	}
	return s.diedOfKillPoint(d)
}

// diedOfKillPoint checks that the exited daemon d died of a SIGKILL, as a
// kill point kills it, and forgets it.
func (s *script) diedOfKillPoint(d *daemonProc) error {
	err := d.waitErr
	s.reap()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return fmt.Errorf("the daemon ended with %v, want its own SIGKILL (a kill point); its log:\n%s", err, s.logTail())
	}
	s.orphans = nil // its packages were never listed: expect none has nothing to check
	s.progress("the daemon killed itself")
	return nil
}
