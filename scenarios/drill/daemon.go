package drill

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/client"
)

// readyLine begins the line serve prints once its API answers.
const readyLine = "open-conduit serve: ready"

// daemonProc is one `open-conduit serve` a script started.
type daemonProc struct {
	cmd     *exec.Cmd
	ready   chan struct{}
	exited  chan struct{}
	waitErr error
	log     *os.File
	// stderr is this daemon's log as it is written, which await log
	// waits on.
	stderr *logBuffer
}

// logBuffer keeps what a daemon logs and wakes its waiters at each
// write: a wait on the log never polls.
type logBuffer struct {
	mu      sync.Mutex
	text    strings.Builder
	changed chan struct{} // closed at the next write
	file    io.Writer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.text.Write(p)
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	return b.file.Write(p)
}

// snapshot is the log so far and a channel closed at the next write.
func (b *logBuffer) snapshot() (string, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.text.String(), b.changed
}

// start starts serve on the script's directories with args and waits for
// its ready line (never a sleep): a daemon that exits first, or is not
// ready within the deadline, fails with the tail of its log.
func (s *script) start(args []string) error {
	if s.d != nil {
		return errors.New("a daemon already runs: daemon stop, kill or restart it first")
	}
	var env, flags []string
	for _, a := range args {
		if k, _, ok := strings.Cut(a, "="); ok && !strings.HasPrefix(a, "-") && k != "" {
			env = append(env, a)
			continue
		}
		flags = append(flags, a)
	}
	if err := s.writeConfig(); err != nil {
		return err
	}
	s.starts++
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "==== daemon start %d: serve %s\n", s.starts, strings.Join(flags, " "))
	cmd := exec.Command(s.bin, append([]string{"serve", "--config", s.configDir, "--state", s.stateDir}, flags...)...)
	cmd.Env = append(s.environ(), env...)
	stderr := &logBuffer{file: logf}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	d := &daemonProc{cmd: cmd, ready: make(chan struct{}), exited: make(chan struct{}), log: logf, stderr: stderr}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(out)
		announced := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, "stdout: "+line)
			if !announced && strings.HasPrefix(line, readyLine) {
				announced = true
				close(d.ready)
			}
		}
		io.Copy(io.Discard, out)
	}()
	go func() {
		<-copied
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	s.d = d
	s.lastArgs = args
	timer := time.NewTimer(s.within)
	defer timer.Stop()
	select {
	case <-d.ready:
	case <-d.exited:
		if s.dying {
			return s.diedOfKillPoint(d)
		}
		s.reap()
		return fmt.Errorf("the daemon exited before it was ready (%v); its log:\n%s", d.waitErr, s.logTail())
	case <-timer.C:
		return fmt.Errorf("the daemon was not ready within %v; its log:\n%s", s.within, s.logTail())
	}
	s.c = client.New(filepath.Join(s.stateDir, client.SocketName))
	ctx, cancel := s.ctx()
	defer cancel()
	st, err := s.c.Status(ctx)
	if err != nil {
		return fmt.Errorf("status after the ready line: %w", err)
	}
	if !st.Ready {
		return fmt.Errorf("the daemon printed ready but its status is not ready: %+v", st.Packages)
	}
	s.started = runningPackages(st)
	s.progress("daemon %d started (pid %d)", s.starts, cmd.Process.Pid)
	return nil
}

// stop sends SIGTERM and wants a clean exit within the deadline.
func (s *script) stop() error {
	d, err := s.running()
	if err != nil {
		return err
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(s.within):
		_ = d.cmd.Process.Kill()
		<-d.exited
		s.reap()
		return fmt.Errorf("the daemon ignored SIGTERM for %v and was killed", s.within)
	}
	s.reap()
	if d.waitErr != nil {
		return fmt.Errorf("the daemon's orderly stop exited with %v; its log:\n%s", d.waitErr, s.logTail())
	}
	s.progress("daemon stopped")
	return nil
}

// kill records the daemon's package processes (for expect none) and sends
// it SIGKILL: no shutdown of any kind runs.
func (s *script) kill() error {
	d, err := s.running()
	if err != nil {
		return err
	}
	st, err := s.statusNow()
	if err != nil {
		return fmt.Errorf("reading the packages before the kill: %w", err)
	}
	s.orphans = runningPackages(st)
	_ = d.cmd.Process.Kill()
	<-d.exited
	s.reap()
	s.progress("daemon killed (SIGKILL)")
	return nil
}

// exited waits for the daemon to die on its own (a kill point's SIGKILL)
// within the deadline, recording its packages for expect none.
func (s *script) exited() error {
	if s.d == nil {
		return errors.New("no daemon runs: daemon start first")
	}
	d := s.d
	s.orphans = s.started // the packages as they ran at the start
	if st, err := s.statusNow(); err == nil {
		s.orphans = runningPackages(st)
	}
	select {
	case <-d.exited:
	case <-time.After(s.within):
		return fmt.Errorf("the daemon still runs after %v; its log:\n%s", s.within, s.logTail())
	}
	err := d.waitErr
	s.reap()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return fmt.Errorf("the daemon ended with %v, want its own SIGKILL (a kill point); its log:\n%s", err, s.logTail())
	}
	s.progress("the daemon killed itself")
	return nil
}

func (s *script) statusNow() (client.Status, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	return s.c.Status(ctx)
}

func runningPackages(st client.Status) []client.Package {
	var out []client.Package
	for _, p := range st.Packages {
		if p.PID > 0 {
			out = append(out, p)
		}
	}
	return out
}

func (s *script) running() (*daemonProc, error) {
	if s.d == nil {
		return nil, errors.New("no daemon runs: daemon start first")
	}
	select {
	case <-s.d.exited:
		err := s.d.waitErr
		s.reap()
		return nil, fmt.Errorf("the daemon has exited on its own (%v); its log:\n%s", err, s.logTail())
	default:
	}
	return s.d, nil
}

// reap forgets an exited daemon.
func (s *script) reap() {
	if s.d == nil {
		return
	}
	s.d.log.Close()
	s.d = nil
	if s.c != nil {
		s.c.Close()
		s.c = nil
	}
}

// shutdown ends whatever still runs when the script ends: the daemon,
// and the process group of each package expect none found left behind, so
// a failing drill leaks nothing.
func (s *script) shutdown() {
	for _, pid := range s.leftover {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	if s.d == nil {
		return
	}
	_ = s.d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.d.exited:
	case <-time.After(s.within):
		_ = s.d.cmd.Process.Kill()
		<-s.d.exited
	}
	s.reap()
}

// writeConfig copies $WORK/config.json, if the script has one, to the
// daemon's config directory with $NAME expanded from the script's
// environment.
func (s *script) writeConfig() error {
	doc, err := os.ReadFile(filepath.Join(s.work, "config.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.configDir, "config.json"), []byte(s.expand(string(doc))), 0o600)
}

func (s *script) logPath() string { return filepath.Join(s.work, "daemon.log") }

// logTail is the end of the daemon's log, for a failure's message.
func (s *script) logTail() string {
	b, _ := os.ReadFile(s.logPath())
	const keep = 4 << 10
	if len(b) > keep {
		b = append([]byte("…"), b[len(b)-keep:]...)
	}
	return string(b)
}

// ctx bounds one call to the daemon by the script's deadline.
func (s *script) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.within)
}

// api is the client of the running daemon.
func (s *script) api() (*client.Client, error) {
	if _, err := s.running(); err != nil {
		return nil, err
	}
	return s.c, nil
}
