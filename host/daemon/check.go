package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
)

// OfflineStartTimeout bounds the start of a package that an offline check
// starts for validate alone (the spec's 15 s).
var OfflineStartTimeout = 15 * time.Second

// CheckOptions configure CheckOffline. The zero value of every field but
// ConfigDir works.
type CheckOptions struct {
	// ConfigDir holds the installed packages (extensions/); the document
	// is passed to CheckOffline.
	ConfigDir string
	// BundledDir holds the packages shipped with the binary ("" for none).
	BundledDir string
	// Executable runs a package whose command is protocol.HostRunCommand
	// (default os.Executable).
	Executable string
	// Version is the host's release, sent in initialize.
	Version string
	// Environ is the environment pass_env grants from (default
	// os.Environ).
	Environ func() []string
	// Logger receives the check's log (default: discard).
	Logger *slog.Logger
}

// OfflineCheck is what CheckOffline found.
type OfflineCheck struct {
	// Valid is true when the document has no diagnostic.
	Valid bool `json:"valid"`
	// Diagnostics are every problem, each with its JSON path and rule.
	Diagnostics []client.Diagnostic `json:"diagnostics,omitempty"`
	// Started are the packages started for validate, in name order.
	Started []StartedPackage `json:"started,omitempty"`
	// Refused are the packages discovery did not admit; their types are
	// unknown to the document.
	Refused []client.Package `json:"refused,omitempty"`
	// Checks are the results of the package checks declared offline, in
	// doctor's shapes and names, in package then check order.
	Checks []client.DoctorCheck `json:"checks,omitempty"`
}

// ChecksFailed counts the checks whose status is fail.
func (c *OfflineCheck) ChecksFailed() int {
	n := 0
	for _, ch := range c.Checks {
		if ch.Status == client.CheckFail {
			n++
		}
	}
	return n
}

// StartedPackage is one package an offline check started for validate.
type StartedPackage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Error is why it did not start; its objects were refused with
	// extension_unavailable.
	Error string `json:"error,omitempty"`
}

// CheckOffline validates doc with no daemon and no store: the same
// validation ApplyConfig runs (ParseConfig, the manifests' static checks,
// each object's package's validate), over the packages discovered in
// opts.ConfigDir and opts.BundledDir. A package is started only when the
// document has an object its validate checks, with a temporary state
// directory (removed before CheckOffline returns), no coordination store
// (its KV, state and event calls are refused), an empty configure whose KV
// layout reads as current (nothing migrates) and OfflineStartTimeout; it is
// stopped once the document is checked. A package that cannot start has
// its objects refused with extension_unavailable, naming it.
//
// It is also offline doctor: each check a started package declares
// offline (protocol.CheckDecl.Offline) runs through check.run, with the
// view of how the document uses the package, when an enabled scope uses
// it. No other package is started for it, and no other check runs.
func CheckOffline(ctx context.Context, opts CheckOptions, doc []byte) (*OfflineCheck, error) {
	if opts.ConfigDir == "" {
		return nil, ErrNoDirectory
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ
	}
	tmp, err := os.MkdirTemp("", "oc-check-")
	if err != nil {
		return nil, fmt.Errorf("daemon: a temporary state directory: %w", err)
	}
	defer os.RemoveAll(tmp)

	// The offline daemon has what validate reads (the packages and their
	// catalogue) and nothing else: no store, no engine, no API.
	d := &Daemon{opts: Options{ConfigDir: opts.ConfigDir, StateDir: tmp, BundledDir: opts.BundledDir,
		Executable: opts.Executable, Version: opts.Version, Logger: opts.Logger, Environ: opts.Environ, NoAPI: true},
		log: opts.Logger, environ: opts.Environ, current: &Config{}}
	pkgs, problems, err := host.DiscoverAll(filepath.Join(opts.ConfigDir, "extensions"), opts.BundledDir)
	if err != nil {
		return nil, fmt.Errorf("daemon: discovering packages: %w", err)
	}
	out := &OfflineCheck{}
	for _, p := range problems {
		out.Refused = append(out.Refused, client.Package{Name: p.Name, State: "refused", Origin: origin(p.Bundled), Dir: p.Dir, LastError: p.Err.Error()})
	}
	if err := host.CheckConflicts(pkgs, nil); err != nil {
		for _, p := range pkgs {
			out.Refused = append(out.Refused, client.Package{Name: p.Name, State: "refused", Origin: origin(p.Bundled), Dir: p.Dir, LastError: err.Error()})
		}
		pkgs = nil
	}
	startCfg, _ := ParseConfig(doc)
	if startCfg == nil {
		startCfg = &Config{}
	}
	var manifests []*protocol.Manifest
	var starts []*startOnCall
	for _, p := range pkgs {
		pr := &pkgRun{pkg: p, passEnv: startCfg.Settings.PassEnv[p.Name]}
		pr.svc = host.NewService(host.ServiceConfig{Manifest: p.Manifest})
		proc, err := host.NewProcess(host.Config{Package: p, StateRoot: tmp, PassEnv: pr.passEnv,
			Environ: opts.Environ, Executable: opts.Executable, HostVersion: opts.Version, Service: pr.svc,
			Logf: func(format string, args ...any) {
				opts.Logger.Info(fmt.Sprintf(format, args...), "package", p.Name)
			},
			StartTimeout: OfflineStartTimeout})
		if err != nil {
			return nil, fmt.Errorf("daemon: %w", err)
		}
		s := &startOnCall{proc: proc}
		starts = append(starts, s)
		pr.proc, pr.remote = proc, host.NewRemote(s)
		d.pkgs = append(d.pkgs, pr)
		manifests = append(manifests, p.Manifest)
	}
	d.cat = newCatalogue(manifests)
	defer func() {
		var wg sync.WaitGroup
		for _, s := range starts {
			wg.Go(func() { _ = s.proc.Close(context.WithoutCancel(ctx)) })
		}
		wg.Wait()
	}()

	out.Diagnostics = d.ValidateConfig(ctx, doc)
	out.Valid = len(out.Diagnostics) == 0
	if cfg, ds := ParseConfig(doc); len(ds) == 0 {
		out.Checks = d.offlineChecks(ctx, cfg, starts)
	}
	for _, s := range starts {
		if name, started, err := s.outcome(); started {
			sp := StartedPackage{Name: name, Version: s.proc.Manifest().Version}
			if err != nil {
				sp.Error = clip(oneLine(err.Error()), maxRefusalBytes)
			}
			out.Started = append(out.Started, sp)
		}
	}
	slices.SortFunc(out.Started, func(a, b StartedPackage) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// offlineChecks runs, at once and each bounded by CheckTimeout, the
// offline checks of the packages validate started (starts[i] is
// d.pkgs[i]'s connection) that an enabled scope of cfg uses.
func (d *Daemon) offlineChecks(ctx context.Context, cfg *Config, starts []*startOnCall) []client.DoctorCheck {
	type job struct {
		pr    *pkgRun
		check string
	}
	var jobs []job
	for i, s := range starts {
		if _, started, err := s.outcome(); !started || err != nil {
			// Never started for a check alone; one that failed to start
			// is already a diagnostic.
			continue
		}
		pr := d.pkgs[i]
		if len(checkViewFor(d.opts.ConfigDir, cfg, d.catalogue(), pr.pkg.Manifest).Scopes) == 0 {
			// Only a disabled scope uses it.
			continue
		}
		for _, c := range pr.pkg.Manifest.Provides.Checks {
			if c.Offline {
				jobs = append(jobs, job{pr, c.Name})
			}
		}
	}
	out := make([]client.DoctorCheck, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { out[i] = d.runPackageCheck(ctx, j.pr, j.check, false, cfg) })
	}
	wg.Wait()
	slices.SortStableFunc(out, func(a, b client.DoctorCheck) int {
		return cmp.Or(cmp.Compare(a.Package, b.Package), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// startOnCall is a package's connection that starts the process at its
// first call, so an offline check starts only the packages whose objects
// it asks about. A start that failed fails every call at once (a
// process in backoff would make Process.Call wait for a restart).
type startOnCall struct {
	proc *host.Process

	once    sync.Once
	mu      sync.Mutex
	started bool
	err     error
}

var _ host.Conn = (*startOnCall)(nil)

func (s *startOnCall) start(ctx context.Context) error {
	s.once.Do(func() {
		// The start has its own bound (OfflineStartTimeout), apart from
		// the caller's.
		err := s.proc.Start(context.WithoutCancel(ctx))
		s.mu.Lock()
		s.started, s.err = true, err
		s.mu.Unlock()
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return fmt.Errorf("it did not start: %w", s.err)
	}
	return nil
}

func (s *startOnCall) outcome() (name string, started bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.Name(), s.started, s.err
}

func (s *startOnCall) Call(ctx context.Context, method string, params, result any) error {
	if err := s.start(ctx); err != nil {
		return err
	}
	return s.proc.Call(ctx, method, params, result)
}

func (s *startOnCall) CallInTx(ctx context.Context, method string, params, result any) error {
	if err := s.start(ctx); err != nil {
		return errors.Join(host.ErrRetryable, err)
	}
	return s.proc.CallInTx(ctx, method, params, result)
}

func (s *startOnCall) Manifest() *protocol.Manifest { return s.proc.Manifest() }
func (s *startOnCall) Service() *host.Service       { return s.proc.Service() }
func (s *startOnCall) Generation() uint64           { return s.proc.Generation() }
