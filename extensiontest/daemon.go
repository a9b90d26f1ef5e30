package extensiontest

import (
	"bufio"
	"bytes"
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

// StartTimeout bounds a daemon's start and its stop.
var StartTimeout = 60 * time.Second

// daemon is one `open-conduit serve` of a case, with its own config and
// state directories and a manual clock.
type daemon struct {
	bin, configDir, stateDir string
	env                      []string
	// clockAt is where the test clock stands at the next start: the
	// case's start time, then wherever a stopped daemon's clock was.
	clockAt time.Time

	client *client.Client
	cmd    *exec.Cmd
	stderr *tailBuffer
	exited chan struct{}
	err    error
}

// start runs serve and waits for its ready line, then for its status.
func (d *daemon) start(ctx context.Context) error {
	args := []string{"serve", "--config", d.configDir, "--state", d.stateDir,
		"--test-clock=" + d.clockAt.UTC().Format(time.RFC3339Nano), "--test-wire-log"}
	cmd := exec.Command(d.bin, args...)
	cmd.Env = append(os.Environ(), d.env...)
	d.stderr = &tailBuffer{max: 64 << 10}
	cmd.Stderr = d.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s serve: %v", d.bin, err)
	}
	d.cmd, d.exited = cmd, make(chan struct{})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), readyLine) {
				once.Do(func() { close(ready) })
			}
		}
		io.Copy(io.Discard, out)
		d.err = cmd.Wait()
		close(d.exited)
	}()
	d.client = client.New(filepath.Join(d.stateDir, client.SocketName))
	timer := time.NewTimer(StartTimeout)
	defer timer.Stop()
	select {
	case <-ready:
	case <-d.exited:
		return fmt.Errorf("the daemon exited before it was ready: %v", d.err)
	case <-timer.C:
		d.kill()
		return fmt.Errorf("the daemon was not ready within %v", StartTimeout)
	case <-ctx.Done():
		d.kill()
		return ctx.Err()
	}
	st, err := d.client.Status(ctx)
	if err != nil {
		return fmt.Errorf("status after the ready line: %w", err)
	}
	if !st.Ready {
		return fmt.Errorf("the daemon printed ready but its status is not ready: %s", packagesLine(st))
	}
	return nil
}

// running reports whether the daemon's process is still there.
func (d *daemon) running() bool {
	if d.cmd == nil {
		return false
	}
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// stop shuts the daemon down in order (SIGTERM), keeping its clock for
// the next start; after StartTimeout it kills it.
func (d *daemon) stop(ctx context.Context) error {
	if !d.running() {
		return nil
	}
	if cs, err := d.client.Clock(ctx); err == nil {
		d.clockAt = cs.Now
	}
	d.client.Close()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(StartTimeout)
	defer timer.Stop()
	select {
	case <-d.exited:
	case <-timer.C:
		d.kill()
		return fmt.Errorf("the daemon ignored SIGTERM for %v and was killed", StartTimeout)
	}
	var exit *exec.ExitError
	if d.err != nil && !errors.As(d.err, &exit) {
		return d.err
	}
	if exit != nil {
		return fmt.Errorf("the daemon exited with %v on SIGTERM", d.err)
	}
	return nil
}

// kill ends the daemon at once (SIGKILL), as a crash would.
func (d *daemon) kill() {
	if !d.running() {
		return
	}
	if cs, err := d.client.Clock(context.Background()); err == nil {
		d.clockAt = cs.Now
	}
	d.client.Close()
	_ = d.cmd.Process.Kill()
	<-d.exited
}

// logTail is the last lines of the daemon's log (its stderr).
func (d *daemon) logTail(lines int) string {
	if d.stderr == nil {
		return ""
	}
	return lastLines(d.stderr.String(), lines)
}

// wireLogDir holds the packages' wire logs (serve --test-wire-log), one
// NAME.wire.jsonl each beside their stderr logs.
func (d *daemon) wireLogDir() string { return filepath.Join(d.stateDir, "logs", "extensions") }

// wireSizes is the size of each package's wire log now, by package name.
func (d *daemon) wireSizes() map[string]int64 {
	sizes := map[string]int64{}
	paths, _ := filepath.Glob(filepath.Join(d.wireLogDir(), "*"+client.WireLogSuffix))
	for _, p := range paths {
		if info, err := os.Stat(p); err == nil {
			sizes[strings.TrimSuffix(filepath.Base(p), client.WireLogSuffix)] = info.Size()
		}
	}
	return sizes
}

// packageLog is the last lines of a package's stderr, which the host
// keeps in the state directory's logs.
func (d *daemon) packageLog(name string, lines int) string {
	data, err := os.ReadFile(filepath.Join(d.stateDir, "logs", "extensions", name+".log"))
	if err != nil {
		return ""
	}
	return lastLines(string(data), lines)
}

func packagesLine(st client.Status) string {
	var parts []string
	for _, p := range st.Packages {
		s := p.Name + " " + p.State
		if p.LastError != "" {
			s += " (" + p.LastError + ")"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "no packages"
	}
	return strings.Join(parts, "; ")
}

func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
