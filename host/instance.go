package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// instance is one OS process of a package.
type instance struct {
	cmd       *exec.Cmd
	conn      *jsonrpc.Conn
	stdin     *os.File
	stderr    *os.File
	startedAt time.Time

	// gate refuses the process's calls until its handshake succeeded.
	gate handshakeGate

	exited     chan struct{} // closed once the child is reaped
	stderrDone chan struct{} // closed at the end of its stderr
	ended      chan struct{} // closed when the process exits or the connection breaks
	endOnce    sync.Once
	waitErr    error
	killOnce   sync.Once
	killErr    error
}

func (p *Process) command() (string, []string, error) {
	m := p.cfg.Package.Manifest
	if m.RunsOnHost() {
		exe := p.cfg.Executable
		if exe == "" {
			var err error
			if exe, err = os.Executable(); err != nil {
				return "", nil, err
			}
		}
		return exe, m.Command[1:], nil
	}
	return filepath.Join(p.cfg.Package.Dir, filepath.FromSlash(m.Command[0])), m.Command[1:], nil
}

// launch starts one process: in the package directory, in its own process
// group, with the sanitised environment, stderr to the log.
func (p *Process) launch() (*instance, error) {
	path, args, err := p.command()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(StateDir(p.cfg.StateRoot, p.name), 0o700); err != nil {
		return nil, err
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (*os.File, *os.File) {
		r, w, perr := os.Pipe()
		if perr != nil {
			err = perr
			return nil, nil
		}
		files = append(files, r, w)
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	growPipe(inW) // a whole base64 chunk crosses in one write
	growPipe(outR)
	cmd := exec.Command(path, args...)
	cmd.Dir = p.cfg.Package.Dir
	cmd.Env = Environment(p.cfg.Environ(), p.cfg.PassEnv)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, fmt.Errorf("starting %s: %w", p.name, err)
	}
	inR.Close()
	outW.Close()
	errW.Close()
	inst := &instance{cmd: cmd, stdin: inW, stderr: errR, startedAt: p.cfg.Clock.Now(),
		exited: make(chan struct{}), stderrDone: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		io.Copy(p.log, errR)
		close(inst.stderrDone)
	}()
	var handler jsonrpc.Handler
	if p.cfg.Service != nil {
		handler = inst.gate.guard(p.name, p.cfg.Service.Handler())
	}
	var connR io.ReadCloser = outR
	var connW io.WriteCloser = inW
	if p.cfg.Interpose != nil {
		connR, connW = p.cfg.Interpose(cmd.Process.Pid, connR, connW)
	}
	if p.cfg.Wire != nil {
		connR, connW = p.cfg.Wire(connR, connW)
	}
	inst.conn = jsonrpc.NewConn(connR, connW, handler, &jsonrpc.Options{
		DecodeError: decodeWireError,
		// Every service method decodes (copies) its params and keeps
		// nothing of them, so their memory is reused: an artifact chunk's
		// 87 KiB of base64 cost page faults on every chunk otherwise.
		ReuseParams: true,
		Logf:        func(format string, args ...any) { p.log.hostLine("protocol: "+format, args...) },
	})
	go func() {
		inst.waitErr = cmd.Wait()
		close(inst.exited)
		// Let the connection read what the process wrote before it
		// exited, then end it: pending calls fail with a transport error.
		select {
		case <-inst.conn.Done():
		case <-time.After(p.cfg.ReapTimeout):
		}
		inst.conn.Close()
		inst.endOnce.Do(func() { close(inst.ended) })
	}()
	go func() {
		<-inst.conn.Done()
		inst.endOnce.Do(func() { close(inst.ended) })
	}()
	return inst, nil
}

func decodeWireError(code int, message string, data json.RawMessage) error {
	return protocol.DecodeWireError(code, message, data)
}

// endCause says why the instance ended.
func (i *instance) endCause() error {
	select {
	case <-i.exited:
		if i.waitErr != nil {
			return fmt.Errorf("process exited: %w", i.waitErr)
		}
		return errors.New("process exited")
	default:
	}
	if err := i.conn.Err(); err != nil {
		return err
	}
	return errors.New("connection ended")
}

func (i *instance) closeStdin() { i.conn.Close() }

func (i *instance) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-i.exited:
		return true
	case <-t.C:
		return false
	}
}

// signal signals the whole process group.
func (i *instance) signal(sig syscall.Signal) {
	_ = syscall.Kill(-i.cmd.Process.Pid, sig)
}

// kill ends the instance at once: SIGKILL to the group, the child reaped
// within reap, and the output released within reap. It is idempotent.
func (i *instance) kill(reap time.Duration) error {
	i.killOnce.Do(func() {
		i.conn.Close()
		i.signal(syscall.SIGKILL)
		var errs []error
		if !i.waitExit(reap) {
			errs = append(errs, fmt.Errorf("%w: pid %d", ErrNotReaped, i.cmd.Process.Pid))
		}
		t := time.NewTimer(reap)
		select {
		case <-i.stderrDone:
		case <-t.C:
			errs = append(errs, ErrDetachedDescendant)
			i.stderr.Close()
		}
		t.Stop()
		i.killErr = errors.Join(errs...)
	})
	return i.killErr
}
