package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/host/packages"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// Options configure Open. The zero value of every field but ConfigDir and
// StateDir works.
type Options struct {
	// ConfigDir holds config.json and installed packages (extensions/).
	ConfigDir string
	// StateDir holds the store, the packages' private state, executor
	// runs, logs, the API socket and the lock.
	StateDir string
	// BundledDir holds the packages shipped with the binary ("" for none;
	// serve passes host.BundledRoot()).
	BundledDir string
	// Packages, when set, are the packages to run instead of discovering
	// them (certification runs one).
	Packages []host.Package
	// Executable runs a package whose command is protocol.HostRunCommand
	// (default os.Executable).
	Executable string
	// Version is the daemon's release, sent in initialize and shown in
	// status.
	Version string
	// Logger receives the daemon's log (default: discard).
	Logger *slog.Logger
	// Clock is the engine's clock (default the system clock).
	Clock runtime.Clock
	// Environ is the daemon's environment, which pass_env grants from
	// and env: secret references read (default os.Environ).
	Environ func() []string
	// NoAPI skips the management API socket.
	NoAPI bool
	// Wire, when set, wraps every package process's streams (a wire tap).
	Wire func(pkg string) func(stdout io.ReadCloser, stdin io.WriteCloser) (io.ReadCloser, io.WriteCloser)
	// Durations of the packages' supervision; zero takes host's defaults.
	ShutdownGrace, TermGrace, ReapTimeout, StartTimeout time.Duration
	// Deferred composes the packages without starting them: the driver
	// starts each with StartPackage (certification starts its package
	// when a check asks for it).
	Deferred bool
	// TestFaults starts every package's process behind a fault proxy
	// (host/faultproxy) and serves POST /v1/faults and DELETE
	// /v1/faults/{package}; off, nothing is interposed and those routes
	// refuse with conflict (serve --test-faults; fault.go).
	TestFaults bool
	// Configure, when set, is each package's fixed configure: config.json
	// is not read and no generation is stored or applied (certification
	// configures its one package in its test scope this way).
	Configure func(host.Package) protocol.ConfigureParams
}

// Daemon is one running composition: the store in the state directory,
// the runtime engine over it, one supervised process per admitted package
// with its host service and adapters registered into the engine, the
// configuration generation in force and the management API. Open builds
// it, Run serves until its context ends, Close shuts it down in order.
type Daemon struct {
	opts   Options
	log    *slog.Logger
	lock   *stateLock
	sqlite *sqlite.Store
	store  notifyingStore
	engine *runtime.Engine
	// journal is the change stream's package and Execution changes
	// (journal.go).
	journal *journal
	// pkgs, refused and cat are the package set; a package reload
	// (reload.go) replaces them whole under setMu, so readers take
	// packages(), refusedPackages() and catalogue().
	setMu   sync.RWMutex
	pkgs    []*pkgRun
	refused []client.Package
	cat     *catalogue
	started time.Time
	environ func() []string

	// toolbelt is the runs' toolbelt endpoint and token issuer.
	toolbelt *toolbelt

	// faults are the packages' fault proxies (Options.TestFaults; nil
	// without).
	faults *faultSet

	// telemetry is the pipeline of captured telemetry events (compose
	// starts it; nil offline).
	telemetry *telemetry

	applyMu sync.Mutex // one validation-and-apply at a time
	clockMu sync.Mutex // one move of a manual clock at a time
	passes  *passRunner

	mu      sync.Mutex
	gen     client.Generation
	current *Config
	doc     []byte
	ready   bool
	closed  bool

	listener net.Listener
	server   *http.Server
	serving  chan struct{}    // closed when the API server has returned
	webhooks *webhookListener // the webhook listener; nil with NoAPI
}

// pkgRun is one admitted package and its parts.
type pkgRun struct {
	pkg host.Package
	svc *host.Service
	// params is the configure the package gets at its next (re)start.
	params atomic.Pointer[protocol.ConfigureParams]
	// passEnv is what the operator granted it when it was composed.
	passEnv []string

	mu     sync.Mutex
	proc   *host.Process
	remote *host.Remote
	// executors are created with the process, so their runs survive a
	// new generation (RestartPackage replaces them).
	executors map[string]runtime.Executor
}

// parts are the package's current process and adapters.
func (pr *pkgRun) parts() (*host.Process, *host.Remote, map[string]runtime.Executor) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.proc, pr.remote, pr.executors
}

var _ apiBackend = (*Daemon)(nil)

// Paths of the state directory.
func lockPath(state string) string   { return filepath.Join(state, "lock") }
func storeDir(state string) string   { return filepath.Join(state, "store") }
func SocketPath(state string) string { return filepath.Join(state, "api.sock") }
func LogDir(state string) string     { return filepath.Join(state, "logs") }

// generationNamespace is the reserved KV namespace the daemon keeps its
// generations in: "current" names the latest number, "gen/<n>" each
// applied document with its hash and time.
const generationNamespace = "core.daemon"

// storedGeneration is one applied configuration as the store keeps it.
type storedGeneration struct {
	client.Generation
	Doc json.RawMessage `json:"doc,omitempty"`
}

// maxSocketPath is the size of a unix socket address's path (sun_path),
// its terminating NUL included.
const maxSocketPath = 108

// AdoptWait bounds how long Open waits for the runs it adopts to be
// recovered before it reports ready anyway.
var AdoptWait = 30 * time.Second

// ErrNoDirectory: ConfigDir or StateDir is empty.
var ErrNoDirectory = errors.New("daemon: the config and state directories are required")

// Open composes a daemon: it takes the state lock, opens the store, builds
// the engine, discovers the packages (installed, then bundled), checks
// their names for conflicts as one set, starts every admitted package at
// once, applies config.json (or the empty configuration when there is
// none), adopts the executions a previous daemon left running and opens
// the management API. serve and certify both compose through it.
func Open(ctx context.Context, opts Options) (d *Daemon, err error) {
	if opts.ConfigDir == "" || opts.StateDir == "" {
		return nil, ErrNoDirectory
	}
	if opts.ConfigDir, err = filepath.Abs(opts.ConfigDir); err != nil {
		return nil, err
	}
	if opts.StateDir, err = filepath.Abs(opts.StateDir); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ
	}
	if opts.Clock == nil {
		opts.Clock = runtime.SystemClock{}
	}
	if path := SocketPath(opts.StateDir); !opts.NoAPI && len(path) >= maxSocketPath {
		return nil, fmt.Errorf("daemon: the API socket path %s is %d bytes, over the %d a unix socket allows: use a shorter state directory", path, len(path), maxSocketPath-1)
	}
	if err := os.MkdirAll(LogDir(opts.StateDir), 0o700); err != nil {
		return nil, fmt.Errorf("daemon: state directory: %w", err)
	}
	d = &Daemon{opts: opts, log: opts.Logger, started: time.Now().UTC(), environ: opts.Environ,
		current: &Config{}, serving: make(chan struct{})}
	if opts.TestFaults {
		d.faults = newFaultSet(d.log)
	}
	if err := armKillPoint(opts.Environ()); err != nil {
		return nil, err
	}
	if d.lock, err = acquireLock(lockPath(opts.StateDir)); err != nil {
		return nil, err
	}
	opened := d // the named result is nil on every error return
	defer func() {
		if err != nil {
			opened.Close(context.WithoutCancel(ctx))
		}
	}()
	if d.sqlite, err = sqlite.Open(storeDir(opts.StateDir)); err != nil {
		return nil, fmt.Errorf("daemon: opening the store: %w", err)
	}
	d.store = newNotifyingStore(killStore(d.sqlite))
	d.journal = d.store.journal
	if d.toolbelt, err = newToolbelt(opts.StateDir, d.Engine, d.log); err != nil {
		return nil, err
	}
	if d.engine, err = runtime.New(runtime.Config{Store: d.store.engineStore(), Clock: opts.Clock, Holder: "daemon", Toolbelt: d.toolbelt,
		OnError: func(err error) { d.log.Warn("engine", "err", err) }}); err != nil {
		return nil, err
	}
	d.passes = newPassRunner(opts.Clock, d.log)
	// Served before anything starts or adopts a run, which is issued
	// the endpoint; without it such a run fails to start, saying why.
	if err := d.toolbelt.listen(opts.StateDir); err != nil {
		d.log.Error("toolbelt endpoint: runs whose binding grants the toolbelt cannot start", "err", err)
	}

	// The document is read before the packages start, for what only a
	// start takes (pass_env); it is validated whole once they run.
	var doc []byte
	found := false
	if opts.Configure == nil {
		if doc, found, err = ReadConfigFile(opts.ConfigDir); err != nil {
			return nil, fmt.Errorf("daemon: %w", err)
		}
	}
	startCfg, _ := ParseConfig(doc)
	if startCfg == nil {
		startCfg = &Config{}
	}
	if err := d.compose(startCfg); err != nil {
		return nil, err
	}
	d.passes.set(client.PassTask, d.taskPasses())
	if !opts.Deferred {
		d.startAll(ctx)
	}

	if opts.Configure != nil {
		// Fixed configures: the packages have theirs; the engine gets
		// their registrations.
		if err := d.engine.Reconfigure(d.tables(&Config{})); err != nil {
			return nil, err
		}
		d.syncSourcePasses()
	} else if !found {
		// Generation 0: nothing applied, nothing stored.
		d.log.Info("no configuration file: running the empty configuration (no scopes)", "file", filepath.Join(opts.ConfigDir, ConfigFile))
		if err := d.activate(ctx, &Config{}, client.Generation{}); err != nil {
			return nil, err
		}
	} else if _, ds, err := d.ApplyConfig(ctx, doc); err != nil {
		return nil, err
	} else if len(ds) > 0 {
		for _, dg := range ds {
			d.log.Error("configuration refused", "path", dg.Path, "rule", dg.Rule, "message", dg.Message)
		}
		if err := d.applyLastGood(ctx); err != nil {
			return nil, err
		}
	}
	if adopted, err := d.engine.Adopt(ctx); err != nil {
		d.log.Warn("adopting running executions", "err", err)
	} else if len(adopted) > 0 {
		// Ready means the adopted runs answer controls: wait for their
		// executor.recover (each bounded by the call's own limits).
		recovered := make(chan struct{})
		go func() { d.engine.WaitAdopted(); close(recovered) }()
		select {
		case <-recovered:
			d.log.Info("adopted running executions", "count", len(adopted))
		case <-time.After(AdoptWait):
			d.log.Warn("adopted executions still recovering; ready without them", "count", len(adopted), "waited", AdoptWait)
		}
	}
	if !opts.NoAPI {
		if err := d.listen(); err != nil {
			return nil, err
		}
		// Where the listener binds is read at start; a later generation's
		// settings.webhooks.listen takes a restart.
		if err := d.listenWebhooks(d.WebhookSetting().Listen); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	d.ready = true
	d.mu.Unlock()
	return d, nil
}

// compose discovers the packages and builds each admitted one's service,
// process and adapters.
func (d *Daemon) compose(startCfg *Config) error {
	pkgs := d.opts.Packages
	if pkgs == nil {
		var problems []host.Problem
		var err error
		// A packaging command that crashed mid-change left its journal:
		// finish or undo it before anything is discovered.
		if err := packages.Recover(installRoot(d.opts.ConfigDir)); err != nil {
			d.log.Error("recovering the install tree", "err", err)
		}
		pkgs, problems, err = host.DiscoverAll(installRoot(d.opts.ConfigDir), d.opts.BundledDir)
		if err != nil {
			return fmt.Errorf("daemon: discovering packages: %w", err)
		}
		for _, p := range problems {
			d.log.Error("package refused", "package", p.Name, "dir", p.Dir, "err", p.Err)
			d.refused = append(d.refused, client.Package{Name: p.Name, State: "refused", Origin: origin(p.Bundled), Dir: p.Dir, LastError: p.Err.Error()})
		}
	}
	if err := host.CheckConflicts(pkgs, nil); err != nil {
		// Conflicts are atomic: none of the set is admitted.
		d.log.Error("conflicting packages: none admitted", "err", err)
		for _, p := range pkgs {
			d.refused = append(d.refused, client.Package{Name: p.Name, State: "refused", Origin: origin(p.Bundled), Dir: p.Dir, LastError: err.Error()})
		}
		pkgs = nil
	}
	var manifests []*protocol.Manifest
	for _, p := range pkgs {
		pr, err := d.newPkgRun(p, startCfg.Settings.PassEnv[p.Name])
		if err != nil {
			return err
		}
		d.pkgs = append(d.pkgs, pr)
		manifests = append(manifests, p.Manifest)
	}
	d.cat = newCatalogue(manifests)
	d.startTelemetry()
	return nil
}

func origin(bundled bool) string {
	if bundled {
		return client.OriginBundled
	}
	return client.OriginInstalled
}

// startAll starts every admitted package at once: the cost is the
// slowest handshake, not the sum.
func (d *Daemon) startAll(ctx context.Context) {
	procs := make([]*host.Process, len(d.pkgs))
	for i, pr := range d.pkgs {
		procs[i], _, _ = pr.parts()
	}
	for i, err := range host.StartAll(ctx, procs) {
		if err != nil {
			d.log.Error("package did not start", "package", d.pkgs[i].pkg.Name, "err", err)
		}
	}
}

// applyLastGood applies the latest stored generation after config.json
// was refused at start, or keeps the empty configuration when there is
// none (or it no longer validates).
func (d *Daemon) applyLastGood(ctx context.Context) error {
	last, ok, err := d.lastGeneration(ctx)
	if err != nil {
		return err
	}
	if !ok {
		d.log.Warn("no earlier generation to fall back to: running the empty configuration")
		return d.activate(ctx, &Config{}, client.Generation{})
	}
	if _, ds, err := d.ApplyConfig(ctx, last.Doc); err != nil {
		return err
	} else if len(ds) > 0 {
		d.log.Warn("the last applied generation no longer validates: running the empty configuration", "generation", last.Number)
		return d.activate(ctx, &Config{}, client.Generation{})
	}
	d.log.Warn("running the last applied generation instead", "generation", last.Number)
	return nil
}

// listen opens the management API on <state>/api.sock, mode 0600.
func (d *Daemon) listen() error {
	path := SocketPath(d.opts.StateDir)
	// The lock is held: a socket file left here is a dead daemon's.
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("daemon: opening the API socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return fmt.Errorf("daemon: API socket: %w", err)
	}
	d.listener = l
	d.server = &http.Server{Handler: newAPI(d), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(d.serving)
		if err := d.server.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("management API", "err", err)
		}
	}()
	return nil
}

// PassBound bounds how long Run waits, once its context ends, for the
// engine's pass under way to finish.
var PassBound = 10 * time.Second

// Run steps the engine until ctx ends. Then it takes no new work and
// returns once the pass under way has finished (a start cut short would
// count as a failed attempt), or after PassBound. It does not close the
// daemon.
func (d *Daemon) Run(ctx context.Context) error {
	d.passes.start(ctx)
	defer d.waitPasses()
	done := make(chan error, 1)
	go func() { done <- d.engine.Run(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		select {
		case err = <-done:
		case <-time.After(PassBound):
			d.log.Warn("the engine's pass was still running at shutdown", "waited", PassBound)
			return nil
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// Close shuts the daemon down in order: the API stops taking requests
// (those in flight finish), the engine stops observing executions (the
// runs go on), every package gets shutdown at once and is stopped within
// its bounds, the leases of running executions are released so a
// restarted daemon adopts them with executor.recover, and the store is
// closed and the lock released. Close may be called more than once.
func (d *Daemon) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed, d.ready = true, false
	d.mu.Unlock()
	var errs []error
	if d.server != nil {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := d.server.Shutdown(sctx); err != nil {
			d.server.Close()
		}
		cancel()
		<-d.serving
		_ = os.Remove(SocketPath(d.opts.StateDir))
	}
	if d.toolbelt != nil {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d.toolbelt.close(tctx, d.opts.StateDir)
		cancel()
	}
	if d.webhooks != nil {
		// Requests in flight finish (their Events are accepted or not)
		// before the packages and the store go.
		d.webhooks.close(ctx)
	}
	if d.engine != nil {
		d.engine.Close()
	}
	// Before the packages stop: the sinks get what their buffers hold.
	d.telemetry.close()
	var wg sync.WaitGroup
	pkgs := d.packages()
	perrs := make([]error, len(pkgs))
	for i, pr := range pkgs {
		wg.Go(func() {
			proc, _, _ := pr.parts()
			perrs[i] = proc.Close(ctx)
		})
	}
	wg.Wait()
	for i, err := range perrs {
		if err != nil {
			errs = append(errs, fmt.Errorf("package %s: %w", pkgs[i].pkg.Name, err))
		}
	}
	if d.sqlite != nil {
		if err := d.releaseLeases(context.WithoutCancel(ctx)); err != nil {
			errs = append(errs, err)
		}
		if err := d.sqlite.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if d.lock != nil {
		d.lock.release()
	}
	return errors.Join(errs...)
}

// releaseLeases releases the lease of every running execution, so the
// next daemon's Adopt takes them over at once.
func (d *Daemon) releaseLeases(ctx context.Context) error {
	return d.sqlite.Transact(ctx, func(tx runtime.Tx) error {
		after := ""
		for {
			works, err := tx.Works(runtime.WorkFilter{State: runtime.WorkRunning, After: after, Limit: runtime.MaxPageLimit})
			if err != nil {
				return err
			}
			for _, w := range works {
				xs, err := tx.Executions(w.ID)
				if err != nil {
					return err
				}
				if n := len(xs); n > 0 && (xs[n-1].State == runtime.ExecutionRunning || xs[n-1].State == runtime.ExecutionStarting) {
					if err := tx.ReleaseLease(xs[n-1].Lease, xs[n-1].Epoch); err != nil && !errors.Is(err, runtime.ErrConflict) {
						return err
					}
				}
			}
			if len(works) < runtime.MaxPageLimit {
				return nil
			}
			after = works[len(works)-1].ID
		}
	})
}

// ---- the management API's backend ----

// Store is the daemon's store.
func (d *Daemon) Store() runtime.Store { return d.store }

// Engine is the daemon's engine; it stays the same across generations.
func (d *Daemon) Engine() *runtime.Engine { return d.engine }

// Changed returns a channel closed at the store's next write and at the
// journal's next change.
func (d *Daemon) Changed() <-chan struct{} { return d.store.Changed() }

func (d *Daemon) changeJournal() *journal { return d.journal }

// Logger is the daemon's log.
func (d *Daemon) Logger() *slog.Logger { return d.log }

// Generation is the generation in force.
func (d *Daemon) Generation() client.Generation {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gen
}

// Status is the daemon's status now.
func (d *Daemon) Status(ctx context.Context) client.Status {
	d.mu.Lock()
	gen, ready := d.gen, d.ready
	d.mu.Unlock()
	st := client.Status{DaemonVersion: d.opts.Version, ProtocolVersions: protocol.SupportedVersions(),
		Generation: gen, PID: os.Getpid(), Started: d.started, Paths: d.Paths(), Packages: []client.Package{}}
	for _, pr := range d.packages() {
		proc, _, _ := pr.parts()
		state, restarts, err := proc.Status()
		p := client.Package{Name: pr.pkg.Name, Version: pr.pkg.Manifest.Version, State: packageState(state),
			Restarts: restarts, PID: proc.PID(), Protocol: proc.Version(), Origin: origin(pr.pkg.Bundled), Dir: pr.pkg.Dir,
			Permissions: slices.Clone(pr.pkg.Manifest.Permissions)}
		if err != nil {
			p.LastError = err.Error()
		}
		if state != host.Running {
			ready = false
		}
		st.Packages = append(st.Packages, p)
	}
	st.Packages = append(st.Packages, d.refusedPackages()...)
	st.Passes = d.passes.statuses()
	st.Ready = ready
	return st
}

// packageState names a process state for the API.
func packageState(s host.State) string {
	switch s {
	case host.Running:
		return "ready"
	case host.Backoff:
		return "restarting"
	case host.Refused:
		return "refused"
	case host.Closed:
		return "stopped"
	}
	return s.String()
}

// Paths says where the daemon keeps its parts.
func (d *Daemon) Paths() client.Paths {
	p := client.Paths{Logs: LogDir(d.opts.StateDir), State: d.opts.StateDir, Config: d.opts.ConfigDir}
	if !d.opts.NoAPI {
		p.Socket = SocketPath(d.opts.StateDir)
	}
	if d.webhooks != nil {
		p.Webhook = d.webhooks.addr()
	}
	if d.toolbelt != nil {
		p.Toolbelt = d.toolbelt.endpoint
	}
	return p
}

// WebhookSetting is the configured settings.webhooks (listen and
// public_url) of the generation in force. The listener binds the listen
// address in force when the daemon opens (Paths().Webhook says where).
func (d *Daemon) WebhookSetting() WebhookSettings {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.current.Settings.Webhooks
}

// Config is the configuration in force with every secret reference
// replaced by a placeholder, and its generation.
func (d *Daemon) Config() (json.RawMessage, client.Generation) {
	d.mu.Lock()
	cfg, gen := d.current, d.gen
	d.mu.Unlock()
	red := *cfg
	red.Connections = make([]ConnectionConfig, len(cfg.Connections))
	for i, c := range cfg.Connections {
		c.SecretRefs = redactRefs(c.SecretRefs)
		red.Connections[i] = c
	}
	b, err := json.Marshal(red)
	if err != nil {
		return json.RawMessage(`{}`), gen
	}
	return b, gen
}

func redactRefs(refs map[string]string) map[string]string {
	if refs == nil {
		return nil
	}
	out := make(map[string]string, len(refs))
	for k := range refs {
		out[k] = "<redacted>"
	}
	return out
}
