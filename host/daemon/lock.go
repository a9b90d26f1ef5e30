package daemon

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrLocked: another daemon holds the state directory's lock.
var ErrLocked = errors.New("another daemon holds the state directory")

// LockedError names the daemon that holds the lock.
type LockedError struct {
	Path string
	// PID is the holder's process ID, 0 if it could not be read.
	PID int
}

func (e *LockedError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("%v (%s)", ErrLocked, e.Path)
	}
	return fmt.Sprintf("%v: pid %d holds %s", ErrLocked, e.PID, e.Path)
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// stateLock is an exclusive flock on <state>/lock, which also holds the
// holder's PID. The kernel drops it when the process dies, however it
// dies, so a stale lock never blocks a restart.
type stateLock struct{ f *os.File }

func acquireLock(path string) (*stateLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("daemon: opening the lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return nil, &LockedError{Path: path, PID: pid}
		}
		return nil, fmt.Errorf("daemon: locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &stateLock{f: f}, nil
}

func (l *stateLock) release() {
	_ = l.f.Truncate(0)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}
