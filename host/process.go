package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/runtime"
)

// Errors of the supervised process.
var (
	// ErrRefused is a deterministic refusal of a package: no common
	// protocol version, a manifest that differs from the file, a KV layout
	// downgrade or registrations outside its namespace. A refused package
	// is never restarted.
	ErrRefused = errors.New("extension refused")
	// ErrClosed: the process was closed.
	ErrClosed = errors.New("extension closed")
	// ErrNotRunning: an in-transaction call found no running process; it
	// never waits for one.
	ErrNotRunning = errors.New("extension not running")
	// ErrRetryable marks a failure that aborts the caller's transaction
	// and leaves its work pending, to be retried (an in-transaction call
	// that timed out or lost its process).
	ErrRetryable = errors.New("retryable")
	// ErrDetachedDescendant: after the process group was killed something
	// outside it still held the extension's output open. It was not
	// killed; the host only let go of it.
	ErrDetachedDescendant = errors.New("a detached descendant of the extension outlived it")
	// ErrNotReaped: the process did not exit within the reaping bound
	// even after SIGKILL.
	ErrNotReaped = errors.New("extension process not reaped")
)

// Durations of Close. Variables, so tests can shorten them; Config fields
// override them per process.
var (
	// DefaultShutdownGrace is how long Close waits after shutdown and the
	// end of stdin before it sends SIGTERM.
	DefaultShutdownGrace = protocol.HostShutdownGrace
	// DefaultTermGrace is how long Close waits after SIGTERM before SIGKILL.
	DefaultTermGrace = protocol.HostTermGrace
	// DefaultReapTimeout bounds the wait for the killed process and for
	// its output to end.
	DefaultReapTimeout = 5 * time.Second
	// DefaultStartTimeout bounds one start: launch, initialize, configure.
	DefaultStartTimeout = 15 * time.Second
)

// KVLayoutNamespace is the reserved KV namespace where the host records
// each extension's KV layout version, under the extension's name. No
// extension can address it: "core" is a reserved name.
const KVLayoutNamespace = "core.extensions"

// HostName is the host's name in initialize.
const HostName = "open-conduit"

// Config configures one supervised package.
type Config struct {
	// Package is the discovered package.
	Package Package
	// StateRoot is the host's state directory: the log goes to
	// logs/extensions/<name>.log, the private state directory is
	// extensions/<name> and executors keep their runs in executors/<name>.
	StateRoot string
	// PassEnv names the daemon variables the operator grants the package.
	PassEnv []string
	// Environ is the daemon's environment (default os.Environ).
	Environ func() []string
	// Executable is the host's own executable, which runs a package whose
	// command is protocol.HostRunCommand (default os.Executable).
	Executable string
	// HostVersion is the host's release, sent in initialize.
	HostVersion string
	// Service serves the extension's calls to the host. It must be bound
	// to this package's manifest. Nil answers every call method_not_found.
	Service *Service
	// Store keeps the KV layout version; nil means none is kept (offline
	// validation) and the layout reads as current.
	Store runtime.Store
	// Configure returns the current configuration generation; nil sends an
	// empty one. The host fills in KV.
	Configure func() protocol.ConfigureParams
	// Clock runs the restart backoff (default the real clock).
	Clock Clock
	// Logf receives the host's lines about the package (default none);
	// they also go to the package's log.
	Logf func(format string, args ...any)

	// Durations; zero takes the Default… variable.
	ShutdownGrace, TermGrace, ReapTimeout, StartTimeout time.Duration
	// InTxDeadline is the in-transaction hard deadline (default
	// protocol.InTransactionDeadline).
	InTxDeadline time.Duration

	// Wire, when set, wraps the streams of every process the host starts:
	// the connection reads the extension's stdout from the returned reader
	// and writes its stdin through the returned writer. Closing either must
	// close the stream it wraps. Certification records the wire with it.
	Wire func(stdout io.ReadCloser, stdin io.WriteCloser) (io.ReadCloser, io.WriteCloser)
	// Interpose, when set, sits nearest the process, inside Wire: it is
	// given each new process's ID (the leader of its process group) and
	// streams, and returns the streams the connection uses, with Wire's
	// contract. The fault proxy (host/faultproxy's Proxy.Interpose) is
	// put in here; nil leaves the pipes as they are.
	Interpose func(pid int, stdout io.ReadCloser, stdin io.WriteCloser) (io.ReadCloser, io.WriteCloser)
}

// State is where a supervised process is in its life.
type State int

const (
	// Stopped: not started yet.
	Stopped State = iota
	// Starting: launching or in its handshake.
	Starting
	// Running: handshake done, serving calls.
	Running
	// Backoff: crashed, waiting to restart.
	Backoff
	// Refused: deterministically refused; never restarted.
	Refused
	// Closed: Close was called.
	Closed
)

func (s State) String() string {
	return [...]string{"stopped", "starting", "running", "backoff", "refused", "closed"}[s]
}

// Process is one supervised extension package: at most one OS process at a
// time, restarted with backoff after a crash, and always re-handshaken.
// Its methods are safe for concurrent use.
type Process struct {
	cfg  Config
	name string
	log  *boundedLog

	mu       sync.Mutex
	state    State
	cur      *instance
	ready    chan struct{} // closed (and replaced) at every state change
	err      error         // the refusal, or the last start error
	restarts int
	gen      uint64 // counts successful starts
	version  protocol.Version
	closing  chan struct{}
	loopDone chan struct{}
	started  bool

	base       context.Context // cancelled by Close, so a start in progress ends
	cancelBase context.CancelFunc
}

// NewProcess prepares a package for Start. It opens (and empties) the
// package's log.
func NewProcess(cfg Config) (*Process, error) {
	if cfg.Package.Manifest == nil {
		return nil, fmt.Errorf("host: package %q has no manifest", cfg.Package.Name)
	}
	if err := protocol.CheckPassEnv(cfg.PassEnv); err != nil {
		return nil, fmt.Errorf("host: the pass_env of %s: %w", cfg.Package.Name, err)
	}
	if cfg.Environ == nil {
		cfg.Environ = os.Environ
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Configure == nil {
		cfg.Configure = func() protocol.ConfigureParams { return protocol.ConfigureParams{} }
	}
	orDefault := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	orDefault(&cfg.ShutdownGrace, DefaultShutdownGrace)
	orDefault(&cfg.TermGrace, DefaultTermGrace)
	orDefault(&cfg.ReapTimeout, DefaultReapTimeout)
	orDefault(&cfg.StartTimeout, DefaultStartTimeout)
	orDefault(&cfg.InTxDeadline, protocol.InTransactionDeadline)
	name := cfg.Package.Manifest.Name
	log, err := openLog(LogPath(cfg.StateRoot, name))
	if err != nil {
		return nil, fmt.Errorf("host: opening the log of %s: %w", name, err)
	}
	if cfg.Service != nil {
		cfg.Service.setLog(log.hostLine)
	}
	base, cancel := context.WithCancel(context.Background())
	return &Process{cfg: cfg, name: name, log: log, ready: make(chan struct{}), base: base, cancelBase: cancel,
		closing: make(chan struct{}), loopDone: make(chan struct{})}, nil
}

// LogPath is where the log of the extension name goes.
func LogPath(stateRoot, name string) string {
	return filepath.Join(stateRoot, "logs", "extensions", name+".log")
}

// StateDir is the private state directory of the extension name.
func StateDir(stateRoot, name string) string {
	return filepath.Join(stateRoot, "extensions", name)
}

// Name is the package's name.
func (p *Process) Name() string { return p.name }

// Manifest is the package's manifest.
func (p *Process) Manifest() *protocol.Manifest { return p.cfg.Package.Manifest }

// Service is the host service the package calls (nil when none).
func (p *Process) Service() *Service { return p.cfg.Service }

// Generation counts the package's successful starts: it changes at every
// restart, so an adapter notices that the process it spoke to is gone.
func (p *Process) Generation() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen
}

// Version is the protocol version negotiated at the last handshake, 0
// before one completed.
func (p *Process) Version() protocol.Version {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version
}

// PID is the process ID of the running process, 0 when none runs.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil || p.cur.cmd.Process == nil {
		return 0
	}
	return p.cur.cmd.Process.Pid
}

// Status reports the state, the restarts so far and the refusal or last
// start error.
func (p *Process) Status() (State, int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state, p.restarts, p.err
}

// Ready is closed at the next change of state; tests wait on it rather
// than sleep.
func (p *Process) Ready() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready
}

func (p *Process) setState(s State, cur *instance, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setStateLocked(s, cur, err)
}

func (p *Process) setStateLocked(s State, cur *instance, err error) {
	if p.state == Closed {
		return
	}
	p.state, p.cur, p.err = s, cur, err
	close(p.ready)
	p.ready = make(chan struct{})
}

func (p *Process) logf(format string, args ...any) {
	p.log.hostLine(format, args...)
	if p.cfg.Logf != nil {
		p.cfg.Logf("extension %s: "+format, append([]any{p.name}, args...)...)
	}
}

// Start starts the package and runs its handshake. A deterministic refusal
// returns an error wrapping ErrRefused and the package stays refused.
// Any other failure is returned too, and the supervisor keeps restarting
// the package with backoff. Start may be called again: after the first
// call it only reports the current state.
func (p *Process) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.started {
		st, err := p.state, p.err
		p.mu.Unlock()
		if st == Running {
			return nil
		}
		return err
	}
	if p.state == Closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.started = true
	p.state = Starting
	p.mu.Unlock()
	inst, err := p.startOnce(ctx)
	p.mu.Lock()
	if p.state == Closed {
		p.mu.Unlock()
		// Close ran while the package started and found no instance.
		if inst != nil {
			inst.kill(p.cfg.ReapTimeout)
		}
		close(p.loopDone)
		return ErrClosed
	}
	switch {
	case errors.Is(err, ErrRefused):
		p.setStateLocked(Refused, nil, err)
		p.mu.Unlock()
		close(p.loopDone)
		return err
	case err != nil:
		p.setStateLocked(Backoff, nil, err)
	default:
		p.setStateLocked(Running, inst, nil)
	}
	p.mu.Unlock()
	go p.supervise(inst)
	return err
}

// StartAll starts every process at once and waits for the slowest
// handshake. The errors are in the processes' order.
func StartAll(ctx context.Context, procs []*Process) []error {
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.Start(ctx) })
	}
	wg.Wait()
	return errs
}

// supervise restarts the package after each crash until Close or a
// refusal. inst is the running instance, nil when the first start failed.
func (p *Process) supervise(inst *instance) {
	defer close(p.loopDone)
	backoff := time.Duration(0)
	for {
		if inst != nil {
			select {
			case <-inst.ended:
			case <-p.closing:
				return
			}
			cause := inst.endCause()
			p.logf("process ended: %v; restarting", cause)
			if p.cfg.Clock.Now().Sub(inst.startedAt) >= BackoffReset {
				backoff = 0
			}
			p.mu.Lock()
			p.restarts++
			p.setStateLocked(Backoff, nil, cause)
			p.mu.Unlock()
			inst.kill(p.cfg.ReapTimeout)
			if p.cfg.Service != nil {
				p.cfg.Service.AbortArtifacts()
			}
		}
		backoff = nextBackoff(backoff)
		select {
		case <-p.cfg.Clock.After(backoff):
		case <-p.closing:
			return
		}
		p.setState(Starting, nil, nil)
		var err error
		inst, err = p.startOnce(p.base)
		switch {
		case errors.Is(err, ErrRefused):
			p.setState(Refused, nil, err)
			return
		case err != nil:
			p.setState(Backoff, nil, err)
			inst = nil
		default:
			p.mu.Lock()
			closing := p.state == Closed
			if !closing {
				p.setStateLocked(Running, inst, nil)
			}
			p.mu.Unlock()
			if closing {
				inst.kill(p.cfg.ReapTimeout)
				return
			}
		}
	}
}

// refuse logs and returns a deterministic refusal.
func (p *Process) refuse(err error) error {
	err = fmt.Errorf("%w: %s: %w", ErrRefused, p.name, err)
	p.logf("refused: %v", err)
	return err
}

// storedKVVersion reads the KV layout version recorded for the package.
func (p *Process) storedKVVersion(ctx context.Context) (int, error) {
	if p.cfg.Store == nil {
		return p.cfg.Package.Manifest.KVVersion, nil
	}
	v := 0
	err := p.cfg.Store.View(ctx, func(tx runtime.ReadTx) error {
		e, found, err := tx.KVGet(KVLayoutNamespace, p.name)
		if err != nil || !found {
			return err
		}
		return json.Unmarshal(e.Value, &v)
	})
	return v, err
}

func (p *Process) recordKVVersion(ctx context.Context, v int) error {
	if p.cfg.Store == nil {
		return nil
	}
	value, _ := json.Marshal(v)
	return p.cfg.Store.Transact(ctx, func(tx runtime.Tx) error {
		return tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: KVLayoutNamespace, Key: p.name, Value: value}}})
	})
}

// startOnce launches one process and runs its handshake.
func (p *Process) startOnce(ctx context.Context) (*instance, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	m := p.cfg.Package.Manifest
	stored, err := p.storedKVVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the KV layout of %s: %w", p.name, err)
	}
	if m.KVVersion < stored {
		return nil, p.refuse(protocol.Errorf(protocol.CodeKVDowngrade,
			"the manifest's kv_version %d is older than the stored KV layout %d", m.KVVersion, stored))
	}
	// Links can change after discovery: check again what is about to run.
	// (A directory that cannot be read is left to the launch, which retries.)
	if err := protocol.CheckPackage(p.cfg.Package.Dir, m); protocol.ManifestErrors(err) != nil {
		return nil, p.refuse(err)
	}
	inst, err := p.launch()
	if err != nil {
		p.logf("start failed: %v", err)
		return nil, err
	}
	fail := func(err error) (*instance, error) {
		inst.kill(p.cfg.ReapTimeout)
		if !errors.Is(err, ErrRefused) {
			p.logf("handshake failed: %v", err)
		}
		return nil, err
	}
	version, err := p.initialize(ctx, inst)
	if err != nil {
		return fail(err)
	}
	params := p.cfg.Configure()
	params.KV = protocol.KVLayout{Stored: stored, Declared: m.KVVersion}
	if err := p.configure(ctx, inst, params); err != nil {
		return fail(err)
	}
	if m.KVVersion != stored {
		if err := p.recordKVVersion(ctx, m.KVVersion); err != nil {
			return fail(fmt.Errorf("recording the KV layout: %w", err))
		}
		p.logf("KV layout %d recorded (was %d): configure migrated it", m.KVVersion, stored)
	}
	p.mu.Lock()
	p.version = version
	p.gen++
	p.mu.Unlock()
	p.logf("started (pid %d, protocol %d)", inst.cmd.Process.Pid, version)
	return inst, nil
}

// InitializeParams is what the host sends in initialize to the package m
// under the state directory stateRoot: every version it speaks, the
// package's private state directory, and the directory each of its
// executors keeps its runs in. With stateRoot empty it names no
// directories.
func InitializeParams(stateRoot string, m *protocol.Manifest) protocol.InitializeParams {
	p := protocol.InitializeParams{ProtocolVersions: protocol.SupportedVersions(), Host: protocol.HostInfo{Name: HostName}}
	if stateRoot == "" {
		return p
	}
	p.StateDir = StateDir(stateRoot, m.Name)
	for _, e := range m.Provides.Executors {
		if p.ExecutorDirs == nil {
			p.ExecutorDirs = map[string]string{}
		}
		p.ExecutorDirs[e.Name] = filepath.Join(stateRoot, "executors", e.Name)
	}
	return p
}

func (p *Process) initialize(ctx context.Context, inst *instance) (protocol.Version, error) {
	m := p.cfg.Package.Manifest
	params := InitializeParams(p.cfg.StateRoot, m)
	params.Host.Version = p.cfg.HostVersion
	var res protocol.InitializeResult
	if err := inst.conn.Call(ctx, "initialize", params, &res); err != nil {
		if errors.Is(err, protocol.ErrUnsupportedProtocolVersion) {
			return 0, p.refuse(err)
		}
		return 0, fmt.Errorf("initialize: %w", err)
	}
	if !protocol.Supported(res.ProtocolVersion) || !slices.Contains(m.Protocol, res.ProtocolVersion) {
		return 0, p.refuse(protocol.Errorf(protocol.CodeUnsupportedProtocolVersion,
			"the extension chose protocol version %d (host %v, manifest %v)", res.ProtocolVersion, protocol.SupportedVersions(), m.Protocol))
	}
	got, err := protocol.DecodeManifest(res.Manifest)
	if err != nil {
		return 0, p.refuse(fmt.Errorf("the manifest initialize returned does not parse: %w", err))
	}
	if !reflect.DeepEqual(got, m) {
		return 0, p.refuse(errors.New("the manifest initialize returned differs from " + protocol.ManifestFile))
	}
	// The process is the package the host started: from here on its calls
	// are served (configure may already read and migrate its KV).
	inst.gate.openAfter(inst.conn.Served())
	return res.ProtocolVersion, nil
}

// handshakeGate keeps the host service shut to one process until its
// handshake has succeeded: the initialize answer read, its protocol
// version and manifest checked. Until then the process has no identity
// the host has confirmed, so every extension-to-host request it sends is
// refused with unauthorized (not method_not_found, which would say the
// host lacks the method; not overloaded or shutting_down, which invite a
// retry) and nothing it asks is applied; notifications are dropped. The
// gate judges a request by where it stood on the stream, not by when its
// handler happens to start: every request read before the host had
// checked the answer is refused, so one sent before the initialize answer
// never is served. The first sign an extension gets that the gate is open
// is configure. Each process of a package (each restart) starts shut.
type handshakeGate struct {
	open atomic.Bool
	// shutThrough is the Seq of the last request read before the gate
	// opened (jsonrpc.Request.Seq): it and every earlier one are refused.
	shutThrough atomic.Uint64
}

// openAfter opens the gate to the requests read after the one numbered
// served.
func (g *handshakeGate) openAfter(served uint64) {
	g.shutThrough.Store(served)
	g.open.Store(true)
}

// guard wraps the service's handler for the process of the package name.
func (g *handshakeGate) guard(name string, inner jsonrpc.Handler) jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		if req.Notification {
			if !g.open.Load() {
				return nil, nil
			}
			return inner.Handle(ctx, req)
		}
		if !g.open.Load() || req.Seq <= g.shutThrough.Load() {
			return nil, protocol.Errorf(protocol.CodeUnauthorized,
				"%s before the handshake: the host serves %s only after it has checked the initialize answer", req.Method, name)
		}
		return inner.Handle(ctx, req)
	})
}

func (p *Process) configure(ctx context.Context, inst *instance, params protocol.ConfigureParams) error {
	var res protocol.ConfigureResult
	if err := inst.conn.Call(ctx, "configure", params, &res); err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	if err := CheckRegistrations(p.cfg.Package.Manifest, params, res); err != nil {
		return p.refuse(err)
	}
	if p.cfg.Service != nil {
		p.cfg.Service.setGeneration(params, res)
	}
	return nil
}

// CheckRegistrations checks what configure (params) registered: every
// source in the extension's source namespace, with families it declares,
// and in no scope or one params configures it in (its root Events are
// accepted in the source's scope, so a source of another scope would be
// a root of that scope's chains); and every webhook path under /<name>.
func CheckRegistrations(m *protocol.Manifest, params protocol.ConfigureParams, res protocol.ConfigureResult) error {
	families := declaredFamilies(m)
	scopes := map[string]bool{}
	for _, list := range [][]protocol.ConfigEntry{params.Entries, params.Disabled} {
		for _, e := range list {
			scopes[e.ScopeID] = true
		}
	}
	var errs, invalid []error
	for _, s := range res.Sources {
		if !protocol.SourceNamespace(m.Name, s.Name) {
			errs = append(errs, fmt.Errorf("source %q is outside the namespace of %s", s.Name, m.Name))
		}
		if s.ScopeID != "" && !scopes[s.ScopeID] {
			errs = append(errs, fmt.Errorf("source %q is in scope %q, which is not one of the scopes %s is configured in", s.Name, clipText(s.ScopeID, 64), m.Name))
		}
		for _, f := range s.Families {
			if !families[f] {
				errs = append(errs, fmt.Errorf("source %q names family %q, which the manifest does not declare", s.Name, f))
			}
		}
		if s.ReconcileInterval != "" {
			if d, err := time.ParseDuration(s.ReconcileInterval); err != nil || d < time.Second || !s.Reconcile {
				invalid = append(invalid, fmt.Errorf("source %q: reconcile_interval %q is not a duration of at least 1s for a reconcile source", s.Name, clipText(s.ReconcileInterval, 64)))
			}
		}
	}
	for _, w := range res.WebhookPaths {
		if w != "/"+m.Name && !strings.HasPrefix(w, "/"+m.Name+"/") || strings.Contains(w, "/../") || strings.HasSuffix(w, "/..") {
			errs = append(errs, fmt.Errorf("webhook path %q is outside /%s", w, m.Name))
		}
	}
	if len(errs) > 0 {
		return protocol.NewError(protocol.CodeUnauthorized, errors.Join(errs...).Error())
	}
	if len(invalid) > 0 {
		return protocol.NewError(protocol.CodeInvalid, errors.Join(invalid...).Error())
	}
	return nil
}

// clipText bounds a value an extension sent before a message quotes it.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

func declaredFamilies(m *protocol.Manifest) map[string]bool {
	out := map[string]bool{}
	for _, e := range m.Provides.Extensions {
		for _, f := range e.Families {
			out[f.Name] = true
		}
	}
	return out
}

// Reconfigure sends the current generation again without a restart.
func (p *Process) Reconfigure(ctx context.Context) error {
	inst, err := p.running(ctx, true)
	if err != nil {
		return err
	}
	m := p.cfg.Package.Manifest
	params := p.cfg.Configure()
	params.KV = protocol.KVLayout{Stored: m.KVVersion, Declared: m.KVVersion}
	return p.configure(ctx, inst, params)
}

// running returns the running instance; with wait it waits for one,
// bounded by ctx.
func (p *Process) running(ctx context.Context, wait bool) (*instance, error) {
	for {
		p.mu.Lock()
		st, cur, err, ready := p.state, p.cur, p.err, p.ready
		p.mu.Unlock()
		switch st {
		case Running:
			// Two single checks, not one select of both: a non-blocking
			// receive from an open, empty channel takes no lock.
			if !closed(cur.ended) && !closed(cur.conn.Done()) {
				return cur, nil
			}
			// Crashed, and the supervisor has yet to notice; or the
			// connection broke and ended is about to close (a goroutine
			// of its own closes it): a call made now, say right after the
			// one the crash failed, would meet the dead connection
			// instead of waiting for the restart. Wait for it.
		case Refused:
			return nil, err
		case Closed:
			return nil, ErrClosed
		}
		if !wait {
			return nil, fmt.Errorf("%w: %s is %s", ErrNotRunning, p.name, st)
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// closed reports whether ch, which is only ever closed, is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Call makes one call to the extension. It waits for a running process,
// bounded by ctx, and never retries: a crash mid-call returns an error
// wrapping jsonrpc.ErrTransport, and the caller applies the crash table.
func (p *Process) Call(ctx context.Context, method string, params, result any) error {
	inst, err := p.running(ctx, true)
	if err != nil {
		return err
	}
	return callWire(ctx, inst.conn, method, params, result)
}

// callWire is conn.Call with the hand-written codec of the wire types that
// have one (protocol.JSONAppender and JSONDecoder: operation.call's params
// and result) in place of encoding/json's reflection. Params with a codec
// are a jsonrpc.Appender as they are: the transport has them append
// themselves straight into the message and checks that against the strict
// rule (appending them into a buffer of their own first cost the echo of
// prototypes/transport an allocation a step as it grew, and a copy). A
// result is decoded as the transport checked it (CheckedJSONDecoder: the
// response's syntax and strict rule are the transport's), its raw members
// aliasing the call's own copy of the response, which nothing else holds.
// A result that does not decode fails as the transport's own decoding
// would.
func callWire(ctx context.Context, conn *jsonrpc.Conn, method string, params, result any) error {
	d, ok := result.(protocol.JSONDecoder)
	if !ok {
		return conn.Call(ctx, method, params, result)
	}
	var raw json.RawMessage
	if err := conn.Call(ctx, method, params, &raw); err != nil {
		return err
	}
	var err error
	if cd, ok := d.(protocol.CheckedJSONDecoder); ok {
		err = cd.DecodeCheckedJSON(raw)
	} else {
		err = d.DecodeJSON(raw)
	}
	if err != nil {
		return fmt.Errorf("jsonrpc: decoding result of %s: %w", method, err)
	}
	return nil
}

// Every codec's params are an Appender to the transport.
var _ jsonrpc.Appender = protocol.JSONAppender(nil)

// CallInTx makes one of the bounded in-transaction calls: it does not wait
// for a restart, enforces the in-transaction deadline, and refuses every
// callback from the extension with reentrant_call while it is
// outstanding. A timeout or transport failure returns an error wrapping
// ErrRetryable, which aborts the caller's transaction.
func (p *Process) CallInTx(ctx context.Context, method string, params, result any) error {
	inst, err := p.running(ctx, false)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrRetryable, method, err)
	}
	return callInTx(ctx, p.cfg.Service, p.cfg.InTxDeadline, inst.conn, method, params, result)
}

// callInTx is CallInTx over any caller: the process's connection or an
// in-process attachment.
func callInTx(ctx context.Context, svc *Service, deadline time.Duration, c Caller, method string, params, result any) error {
	if svc != nil {
		svc.enterTx()
		defer svc.exitTx()
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	err := c.Call(ctx, method, params, result)
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jsonrpc.ErrTransport) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: in-transaction %s: %w", ErrRetryable, method, err)
	}
	return err
}

// Caller makes one call of the protocol (see protocol/sdk's Caller).
type Caller interface {
	Call(ctx context.Context, method string, params, result any) error
}

// Close stops the package: shutdown, end of stdin, SIGTERM after the
// grace period, then SIGKILL to its process group, and the child reaped
// within a bound. It returns an error wrapping ErrDetachedDescendant when
// something outside the group kept the extension's output open, and
// ErrNotReaped when the child did not exit. Close may be called more than
// once.
func (p *Process) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.state == Closed {
		p.mu.Unlock()
		return nil
	}
	cur, started := p.cur, p.started
	p.state = Closed
	p.cur = nil
	close(p.ready)
	p.ready = make(chan struct{})
	close(p.closing)
	p.mu.Unlock()
	p.cancelBase()
	if started {
		<-p.loopDone
	}
	var err error
	if cur != nil {
		err = p.stop(ctx, cur)
	}
	if err != nil {
		p.logf("close: %v", err)
	} else {
		p.logf("closed")
	}
	p.log.Close()
	return err
}

// stop ends inst gracefully.
func (p *Process) stop(ctx context.Context, inst *instance) error {
	sctx, cancel := context.WithTimeout(ctx, p.cfg.ShutdownGrace)
	_ = inst.conn.Call(sctx, "shutdown", protocol.Empty{}, nil)
	cancel()
	inst.closeStdin()
	if !inst.waitExit(p.cfg.ShutdownGrace) {
		p.logf("still running after shutdown; sending SIGTERM")
		inst.signal(syscall.SIGTERM)
		if !inst.waitExit(p.cfg.TermGrace) {
			p.logf("still running after SIGTERM; sending SIGKILL")
		}
	}
	return inst.kill(p.cfg.ReapTimeout)
}
