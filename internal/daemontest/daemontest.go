// Package daemontest runs the built open-conduit binary as a daemon for
// tests that drive it as an operator would: `serve` with --config and
// --state in short temporary directories, readiness known from the
// daemon's own "ready" line and then confirmed through client (no sleeps,
// no polling), and a stop that checks how it ended.
//
//	bin, _ := testbin.Build(dir)
//	d := daemontest.Start(t, daemontest.Options{Binary: bin, Packages: []string{"../../extensions/notes"}})
//	st, err := d.Client.Status(ctx)
package daemontest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
)

// ReadyLine begins the line serve prints once its API answers, after
// the lines that say where its parts are.
const ReadyLine = "open-conduit serve: ready"

// Timeout bounds a start and a stop.
var Timeout = 60 * time.Second

// Options say how to start a daemon.
type Options struct {
	// Binary is the open-conduit executable (testbin.Build).
	Binary string
	// ConfigDir and StateDir default to new short temporary directories
	// (a unix socket path must stay under 108 bytes).
	ConfigDir, StateDir string
	// Packages are package directories installed (copied) under
	// <config>/extensions/<base name> before the start.
	Packages []string
	// Config, when set, is written as <config>/config.json.
	Config []byte
	// Env is added to the daemon's environment.
	Env []string
	// Args are more serve flags (--log-format json …).
	Args []string
}

// Daemon is one running `open-conduit serve`.
type Daemon struct {
	// Client talks to its management API.
	Client              *client.Client
	ConfigDir, StateDir string
	Cmd                 *exec.Cmd

	stdout, stderr *Buffer
	ready          chan struct{}
	exited         chan struct{}
	waitErr        error
}

// TempDir is a new short temporary directory, removed at the end of tb.
func TempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "oc")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Start starts the daemon and waits until it is ready. The daemon is
// stopped (SIGTERM, then SIGKILL) at the end of tb if it still runs.
func Start(tb testing.TB, opts Options) *Daemon {
	tb.Helper()
	d, err := Launch(tb, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := d.WaitReady(context.Background()); err != nil {
		tb.Fatalf("%v\nstderr:\n%s", err, d.Stderr())
	}
	return d
}

// Launch starts the daemon without waiting for it (a test of a daemon
// that must not get ready uses it with Wait).
func Launch(tb testing.TB, opts Options) (*Daemon, error) {
	tb.Helper()
	if opts.Binary == "" {
		return nil, errors.New("daemontest: no binary")
	}
	if opts.ConfigDir == "" {
		opts.ConfigDir = TempDir(tb)
	}
	if opts.StateDir == "" {
		opts.StateDir = TempDir(tb)
	}
	for _, p := range opts.Packages {
		if err := Install(opts.ConfigDir, p); err != nil {
			return nil, err
		}
	}
	if opts.Config != nil {
		if err := WriteConfig(opts.ConfigDir, opts.Config); err != nil {
			return nil, err
		}
	}
	args := append([]string{"serve", "--config", opts.ConfigDir, "--state", opts.StateDir}, opts.Args...)
	cmd := exec.Command(opts.Binary, args...)
	cmd.Env = append(os.Environ(), opts.Env...)
	d := &Daemon{ConfigDir: opts.ConfigDir, StateDir: opts.StateDir, Cmd: cmd,
		Client: client.New(filepath.Join(opts.StateDir, "api.sock")),
		stdout: &Buffer{}, stderr: &Buffer{}, ready: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stderr = d.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			d.stdout.Write([]byte(line + "\n"))
			if strings.HasPrefix(line, ReadyLine) {
				once.Do(func() { close(d.ready) })
			}
		}
		io.Copy(io.Discard, out)
	}()
	go func() {
		<-copied
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	tb.Cleanup(func() {
		d.Client.Close()
		select {
		case <-d.exited:
		default:
			_ = d.Stop()
		}
	})
	return d, nil
}

// WaitReady waits for the ready line and then asks the daemon's status
// through client. It fails if the daemon exits first.
func (d *Daemon) WaitReady(ctx context.Context) (client.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	select {
	case <-d.ready:
	case <-d.exited:
		return client.Status{}, fmt.Errorf("daemontest: the daemon exited before it was ready: %v", d.waitErr)
	case <-ctx.Done():
		return client.Status{}, fmt.Errorf("daemontest: the daemon was not ready within %v", Timeout)
	}
	st, err := d.Client.Status(ctx)
	if err != nil {
		return st, fmt.Errorf("daemontest: status after ready: %w", err)
	}
	if !st.Ready {
		return st, fmt.Errorf("daemontest: the daemon printed ready but its status is not: %+v", st)
	}
	return st, nil
}

// Signal sends sig to the daemon.
func (d *Daemon) Signal(sig os.Signal) error { return d.Cmd.Process.Signal(sig) }

// Exited is closed when the daemon has exited.
func (d *Daemon) Exited() <-chan struct{} { return d.exited }

// Wait waits for the daemon to exit and returns how (an *exec.ExitError
// for a non-zero status), bounded by Timeout.
func (d *Daemon) Wait() error {
	select {
	case <-d.exited:
		return d.waitErr
	case <-time.After(Timeout):
		return fmt.Errorf("daemontest: the daemon did not exit within %v", Timeout)
	}
}

// Stop sends SIGTERM and waits for the exit; after Timeout it kills.
func (d *Daemon) Stop() error {
	select {
	case <-d.exited:
		return d.waitErr
	default:
	}
	_ = d.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		return d.waitErr
	case <-time.After(Timeout):
		_ = d.Cmd.Process.Kill()
		<-d.exited
		return fmt.Errorf("daemontest: the daemon ignored SIGTERM for %v and was killed", Timeout)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (d *Daemon) Kill() error {
	_ = d.Cmd.Process.Kill()
	<-d.exited
	return nil
}

// Stdout is what the daemon printed so far.
func (d *Daemon) Stdout() string { return d.stdout.String() }

// Stderr is what the daemon logged so far.
func (d *Daemon) Stderr() string { return d.stderr.String() }

// WriteConfig writes doc as <dir>/config.json.
func WriteConfig(dir string, doc []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), doc, 0o600)
}

// Install copies the package directory src to <configDir>/extensions/<base>.
func Install(configDir, src string) error {
	dst := filepath.Join(configDir, "extensions", filepath.Base(src))
	return filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
}

// WaitStderr waits until the daemon's log holds want, bounded by
// Timeout and by the daemon's exit.
func (d *Daemon) WaitStderr(want string) error {
	return d.stderr.wait(want, d.exited)
}

// WaitStdout waits until the daemon's output holds want.
func (d *Daemon) WaitStdout(want string) error {
	return d.stdout.wait(want, d.exited)
}

// Buffer is a bytes.Buffer safe for concurrent use whose readers can wait
// for what they expect instead of polling.
type Buffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed at the next Write
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	return b.b.Write(p)
}

// wait waits until the buffer holds want, or exited closes (then what was
// written before is checked once more), or Timeout passes.
func (b *Buffer) wait(want string, exited <-chan struct{}) error {
	deadline := time.After(Timeout)
	for {
		b.mu.Lock()
		has := strings.Contains(b.b.String(), want)
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		ch := b.changed
		b.mu.Unlock()
		if has {
			return nil
		}
		select {
		case <-ch:
		case <-exited:
			if strings.Contains(b.String(), want) {
				return nil
			}
			return fmt.Errorf("daemontest: the daemon exited without writing %q", want)
		case <-deadline:
			return fmt.Errorf("daemontest: %q not written within %v", want, Timeout)
		}
	}
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
