package certify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/host/daemon"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// TestScope is the scope certification configures the package in, with
// one entry of each extension type the manifest declares.
const TestScope = "certify"

// Durations of a certified package's supervision: shorter than a daemon's,
// so a package that ignores shutdown costs seconds, not minutes.
const (
	certifyShutdownGrace = time.Second
	certifyTermGrace     = time.Second
	certifyReapTimeout   = 2 * time.Second
	certifyStartTimeout  = 10 * time.Second
)

// HostLaunch returns the LaunchFunc that runs a package under the real
// host, composed as serve composes it (daemon.Open, with the run's state
// directory, this one package, its fixed configure and the certification
// durations): a host.Process over the package's command (executable is
// the open-conduit binary that runs a package whose command is
// protocol.HostRunCommand; "" for os.Executable), a host.Service bound to
// its manifest on the SQLite store in the run's state directory with the
// engine behind it, one test scope with an entry per declared extension
// type, and a wire tap that records every line for the trace. A line the package writes to stdout
// that is not a JSON object is recorded and kept from the connection, so
// stray output fails lifecycle/stdout-hygiene without breaking the other
// criteria.
func HostLaunch(executable string) LaunchFunc {
	return func(ctx context.Context, spec LaunchSpec) (Package, error) {
		if spec.Manifest == nil {
			return nil, Harnessf("no manifest to launch")
		}
		if spec.StateDir == "" {
			return nil, Harnessf("no state directory to launch in")
		}
		dir, err := filepath.Abs(spec.Dir)
		if err != nil {
			return nil, Harnessf("package directory: %w", err)
		}
		exe := executable
		if exe == "" {
			if exe, err = os.Executable(); err != nil {
				return nil, Harnessf("finding the open-conduit executable: %w", err)
			}
		}
		if spec.Manifest.RunsOnHost() {
			// The host runs this package on its own executable: a missing
			// one is the runner's fault, not the package's.
			if info, err := os.Stat(exe); err != nil || info.IsDir() {
				return nil, Harnessf("the open-conduit executable %q that runs %s is not there: %v", exe, spec.Manifest.Name, err)
			}
		}
		return &hostPackage{dir: dir, manifest: spec.Manifest, root: spec.StateDir, exe: exe,
			inputs: spec.Inputs, wire: &wireRecorder{stream: spec.Trace}}, nil
	}
}

// hostPackage is the Package HostLaunch makes; it is also the
// conformance.PackageDriver the suites drive.
type hostPackage struct {
	dir      string
	manifest *protocol.Manifest
	root     string
	exe      string
	inputs   *conformance.Inputs
	wire     *wireRecorder
	spare    tailBuffer // stderr of spare processes

	mu      sync.Mutex
	d       *daemon.Daemon // the composition, open from the first use to Stop
	svc     *host.Service
	proc    *host.Process // the daemon's current process of the package
	base    int           // restarts the host had made when proc last started
	kills   int           // of them, kills the suites made on purpose
	stopped bool

	// faults is the robustness pass's rule (faults.go); nil outside it.
	faults *faultArm
}

var (
	_ Package                   = (*hostPackage)(nil)
	_ conformance.PackageDriver = (*hostPackage)(nil)
	_ conformance.RawPackage    = (*spareProcess)(nil)
	_ conformance.RawStdin      = (*spareProcess)(nil)
	_ conformance.Signaller     = (*spareProcess)(nil)
	_ conformance.InputSource   = (*hostPackage)(nil)
)

func (h *hostPackage) Manifest() *protocol.Manifest { return h.manifest }

// Inputs are the author's inputs (conformance.InputsFile); nil without one.
func (h *hostPackage) Inputs() *conformance.Inputs { return h.inputs }

func (h *hostPackage) ConfigureParams() protocol.ConfigureParams {
	var p protocol.ConfigureParams
	p.Entries = []protocol.ConfigEntry{}
	p.Connections = []protocol.Connection{}
	for _, e := range h.manifest.Provides.Extensions {
		p.Entries = append(p.Entries, protocol.ConfigEntry{ScopeID: TestScope, ID: "certify-" + e.Type, Type: e.Type, Config: json.RawMessage(`{}`)})
	}
	// As the host sends it once the layout is recorded: the supervised
	// process's handshake records the manifest's kv_version first.
	p.KV = protocol.KVLayout{Stored: h.manifest.KVVersion, Declared: h.manifest.KVVersion}
	return p
}

func (h *hostPackage) InitializeParams() protocol.InitializeParams {
	p := host.InitializeParams(h.root, h.manifest)
	p.Host.Version = HostVersion()
	return p
}

// open composes the daemon on first use, with the package composed but
// not started: Start starts it.
func (h *hostPackage) open(ctx context.Context) error {
	if h.d != nil {
		return nil
	}
	pkg := host.Package{Name: h.manifest.Name, Dir: h.dir, Manifest: h.manifest}
	d, err := daemon.Open(ctx, daemon.Options{
		ConfigDir: filepath.Join(h.root, "config"), StateDir: h.root, Packages: []host.Package{pkg},
		Executable: h.exe, Version: HostVersion(), NoAPI: true, Deferred: true,
		Configure: func(host.Package) protocol.ConfigureParams { return h.ConfigureParams() },
		Wire: func(string) func(io.ReadCloser, io.WriteCloser) (io.ReadCloser, io.WriteCloser) {
			return h.wire.tap
		},
		ShutdownGrace: certifyShutdownGrace, TermGrace: certifyTermGrace,
		ReapTimeout: certifyReapTimeout, StartTimeout: certifyStartTimeout,
		TestFaults: h.faults != nil,
	})
	if err != nil {
		return Harnessf("composing the certification host: %w", err)
	}
	_, svc, ok := d.Package(h.manifest.Name)
	if !ok {
		st := d.Status(ctx)
		d.Close(context.WithoutCancel(ctx))
		for _, p := range st.Packages {
			if p.LastError != "" {
				return fmt.Errorf("the host does not admit %s: %s", h.manifest.Name, p.LastError)
			}
		}
		return fmt.Errorf("the host does not admit %s", h.manifest.Name)
	}
	if err := h.faults.arm(d, h.manifest.Name); err != nil {
		d.Close(context.WithoutCancel(ctx))
		return err
	}
	h.d, h.svc = d, svc
	return nil
}

// Start starts the supervised process with its handshake.
func (h *hostPackage) Start(ctx context.Context) error {
	h.mu.Lock()
	if err := h.open(ctx); err != nil {
		h.mu.Unlock()
		return err
	}
	d := h.d
	h.mu.Unlock()
	err := d.StartPackage(ctx, h.manifest.Name)
	proc, _, _ := d.Package(h.manifest.Name)
	h.mu.Lock()
	h.proc, h.base, h.kills, h.stopped = proc, 0, 0, false
	h.mu.Unlock()
	if err != nil {
		// A package that failed its start is not restarted behind the
		// suites' backs.
		d.ClosePackage(ctx, h.manifest.Name, false)
		return err
	}
	return nil
}

// Restart ends the supervised process, killing it if it must, and starts
// a new one.
func (h *hostPackage) Restart(ctx context.Context) error {
	h.closeProc(ctx, true)
	return h.Start(ctx)
}

// closeProc closes the supervised process; with hurry it skips shutdown.
func (h *hostPackage) closeProc(ctx context.Context, hurry bool) error {
	h.mu.Lock()
	d, proc := h.d, h.proc
	h.stopped = true
	h.mu.Unlock()
	if d == nil || proc == nil {
		return nil
	}
	return d.ClosePackage(ctx, h.manifest.Name, hurry)
}

// Stop shuts the package down in order and closes the daemon and its
// store.
func (h *hostPackage) Stop(ctx context.Context) error {
	err := h.closeProc(ctx, false)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.d != nil {
		h.faults.collect(h.d, h.manifest.Name)
		err = errors.Join(err, h.d.Close(context.WithoutCancel(ctx)))
		h.d, h.svc = nil, nil
	}
	return err
}

func (h *hostPackage) current() (*host.Process, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proc == nil {
		return nil, Harnessf("the package was not started")
	}
	return h.proc, nil
}

func (h *hostPackage) Call(ctx context.Context, method string, params, result any) error {
	proc, err := h.current()
	if err != nil {
		return err
	}
	return proc.Call(ctx, method, params, result)
}

// Exited reports a crash the host saw since the process last started; the
// kills a suite made on purpose have no cause.
func (h *hostPackage) Exited() (bool, error) {
	h.mu.Lock()
	proc, base, kills, stopped := h.proc, h.base, h.kills, h.stopped
	h.mu.Unlock()
	if proc == nil {
		return false, nil
	}
	if stopped {
		return true, nil
	}
	st, restarts, err := proc.Status()
	if st == host.Refused {
		return true, err
	}
	if restarts-base > kills {
		if st != host.Backoff || err == nil {
			err = fmt.Errorf("the process ended unexpectedly %d time(s); the host restarted it", restarts-base-kills)
		}
		return true, err
	}
	return false, nil
}

func (h *hostPackage) ProtocolVersion() protocol.Version {
	proc, err := h.current()
	if err != nil {
		return 0
	}
	return proc.Version()
}

func (h *hostPackage) Trace() []WireMessage {
	lines := h.wire.Lines()
	out := make([]WireMessage, len(lines))
	for i, l := range lines {
		out[i] = wireMessage(l.Time, l.FromExtension, l.Line)
	}
	return out
}

func (h *hostPackage) StderrTail() string {
	data, _ := os.ReadFile(host.LogPath(h.root, h.manifest.Name))
	out := tailBytes(string(data), EvidenceStderrBytes)
	if spare := h.spare.String(); spare != "" {
		out += "\n[spare processes]\n" + spare
	}
	return tailBytes(out, EvidenceStderrBytes)
}

func (h *hostPackage) Wire() []conformance.WireLine { return h.wire.Lines() }

func (h *hostPackage) WireChanged() <-chan struct{} { return h.wire.Changed() }

func (h *hostPackage) Generation() uint64 {
	proc, err := h.current()
	if err != nil {
		return 0
	}
	return proc.Generation()
}

// Kill sends SIGKILL to the supervised process's group, as a crash would.
func (h *hostPackage) Kill() error {
	proc, err := h.current()
	if err != nil {
		return err
	}
	pid := proc.PID()
	if pid == 0 {
		return errors.New("no process is running")
	}
	h.mu.Lock()
	h.kills++
	h.mu.Unlock()
	return syscall.Kill(-pid, syscall.SIGKILL)
}

func (h *hostPackage) OpenRun(workID, executionID string) (string, func() json.RawMessage) {
	h.mu.Lock()
	svc := h.svc
	h.mu.Unlock()
	return svc.OpenRecordingRun(workID, executionID)
}

// Spawn starts a spare process of the package, as the host would start
// it, with nothing sent yet. Its callbacks are served by the run's service
// and its wire goes to the same trace.
func (h *hostPackage) Spawn(ctx context.Context) (conformance.RawPackage, error) {
	h.mu.Lock()
	if err := h.open(ctx); err != nil {
		h.mu.Unlock()
		return nil, err
	}
	svc := h.svc
	h.mu.Unlock()
	path, args := h.exe, h.manifest.Command[1:]
	if !h.manifest.RunsOnHost() {
		path = filepath.Join(h.dir, filepath.FromSlash(h.manifest.Command[0]))
	}
	if err := os.MkdirAll(host.StateDir(h.root, h.manifest.Name), 0o700); err != nil {
		return nil, Harnessf("%w", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = h.dir
	cmd.Env = host.Environment(os.Environ(), nil)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = &h.spare
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, Harnessf("%w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, Harnessf("%w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	r, w := h.wire.tap(stdout, stdin)
	sp := &spareProcess{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	sp.conn = jsonrpc.NewConn(r, w, sp.gate.Handler(svc.Handler()), &jsonrpc.Options{
		DecodeError: func(code int, message string, data json.RawMessage) error {
			return protocol.DecodeWireError(code, message, data)
		},
	})
	go func() {
		_ = cmd.Wait()
		close(sp.exited)
	}()
	return sp, nil
}

// spareProcess is a process Spawn started.
type spareProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	conn   *jsonrpc.Conn
	gate   conformance.CallbackGate
	exited chan struct{}
	once   sync.Once
}

func (s *spareProcess) Intercept(f conformance.CallbackInterceptor) func() {
	return s.gate.Intercept(f)
}

func (s *spareProcess) Call(ctx context.Context, method string, params, result any) error {
	return s.conn.Call(ctx, method, params, result)
}

func (s *spareProcess) Notify(ctx context.Context, method string, params any) error {
	return s.conn.Notify(ctx, method, params)
}

func (s *spareProcess) CloseStdin() error { return s.stdin.Close() }

// WriteStdin writes b to the process's stdin as it is, past the wire tap
// (conformance.RawStdin): a malformed line is no message to record.
func (s *spareProcess) WriteStdin(b []byte) error {
	_, err := s.stdin.Write(b)
	return err
}

// Signal signals the process itself, not its group (conformance.Signaller).
func (s *spareProcess) Signal(sig os.Signal) error { return s.cmd.Process.Signal(sig) }
func (s *spareProcess) Exited() <-chan struct{}    { return s.exited }

func (s *spareProcess) Kill() error {
	s.once.Do(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		s.conn.Close()
	})
	select {
	case <-s.exited:
		return nil
	case <-time.After(certifyReapTimeout):
		return fmt.Errorf("spare process %d not reaped", s.cmd.Process.Pid)
	}
}

// ---- the wire tap ----

// wireRecorder records every line of every process of a run and, with a
// stream, writes each as a line of the trace as it is recorded, so a run
// killed midway keeps its transcript up to then.
type wireRecorder struct {
	conformance.WireLog
	mu     sync.Mutex
	stream io.Writer
	enc    *json.Encoder
	err    error
}

// Add records one line and streams it.
func (w *wireRecorder) Add(fromExtension bool, line []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.WireLog.Add(fromExtension, line)
	if w.stream == nil || w.err != nil || len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if w.enc == nil {
		w.enc = json.NewEncoder(w.stream)
	}
	w.err = w.enc.Encode(wireMessage(time.Now(), fromExtension, bytes.TrimRight(line, "\r\n")))
}

// wireMessage is one recorded line as the trace shows it.
func wireMessage(at time.Time, fromExtension bool, line []byte) WireMessage {
	m := WireMessage{Time: at, Direction: DirectionToExtension}
	if fromExtension {
		m.Direction = DirectionFromExtension
	}
	if jsonObject(line) {
		m.Message = json.RawMessage(line)
	} else {
		m.Text = string(line)
	}
	return m
}

// tap wraps a process's streams (host.Config.Wire).
func (w *wireRecorder) tap(stdout io.ReadCloser, stdin io.WriteCloser) (io.ReadCloser, io.WriteCloser) {
	return &tapReader{rec: w, c: stdout, br: bufio.NewReaderSize(stdout, 64<<10)}, &tapWriter{rec: w, w: stdin}
}

// jsonObject reports whether line is a JSON object.
func jsonObject(line []byte) bool {
	t := bytes.TrimSpace(line)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// tapReader records each line the package writes and passes on only JSON
// objects.
type tapReader struct {
	rec     *wireRecorder
	c       io.Closer
	br      *bufio.Reader
	pending []byte
	err     error
}

func (t *tapReader) Read(p []byte) (int, error) {
	for len(t.pending) == 0 {
		if t.err != nil {
			return 0, t.err
		}
		line, err := t.br.ReadBytes('\n')
		t.err = err
		if len(line) > 0 {
			t.rec.Add(true, line)
			if jsonObject(line) {
				t.pending = line
			}
		}
	}
	n := copy(p, t.pending)
	t.pending = t.pending[n:]
	return n, nil
}

func (t *tapReader) Close() error { return t.c.Close() }

// tapWriter records each message the host writes (one per Write).
type tapWriter struct {
	rec *wireRecorder
	w   io.WriteCloser
}

func (t *tapWriter) Write(p []byte) (int, error) {
	t.rec.Add(false, p)
	return t.w.Write(p)
}

func (t *tapWriter) Close() error { return t.w.Close() }

// tailBuffer keeps the last EvidenceStderrBytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - EvidenceStderrBytes; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// NewCommand returns `extension certify` wired to the real host:
// HostLaunch(executable) makes the package, and each criterion's Check
// drives it.
func NewCommand(executable string) Command {
	return Command{Launch: HostLaunch(executable)}
}

// ErrNotApplicable marks a check that found nothing in what the package
// declares to check: the criterion ends as skip, with the reason.
var ErrNotApplicable = conformance.ErrNotApplicable

// skipReason is the reason of an ErrNotApplicable error.
func skipReason(err error) string {
	return strings.TrimPrefix(err.Error(), ErrNotApplicable.Error()+": ")
}
