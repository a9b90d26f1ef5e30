package certify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/protocol"
)

// Defaults of Config.
const (
	// DefaultTimeout is how long one criterion may run.
	DefaultTimeout = 30 * time.Second
	// DefaultGrace is how long a criterion past its deadline has to return
	// before the runner abandons it.
	DefaultGrace = 2 * time.Second
)

// Config says what Run certifies and how. Its zero value, with Dir set,
// runs every criterion with the default timeout and no package launcher.
type Config struct {
	// Dir is the package directory, holding protocol.ManifestFile.
	Dir string
	// Criteria are the criteria to run, in order; nil for Criteria().
	Criteria []Criterion
	// Select keeps the criteria whose ID it matches (--run); nil keeps all.
	Select *regexp.Regexp
	// Baseline lists the IDs of criteria the package is known to fail
	// (--baseline). Each must name a criterion.
	Baseline []string
	// Timeout bounds each criterion; 0 for DefaultTimeout.
	Timeout time.Duration
	// Grace is how long a criterion past its deadline has to return before
	// it is abandoned; 0 for DefaultGrace.
	Grace time.Duration
	// Launch makes the Package; nil leaves the criteria that need a running
	// package as harness errors.
	Launch LaunchFunc
	// Progress receives a line per criterion as it ends; nil for none.
	Progress io.Writer
	// Keep keeps the temporary state directory; its path is in the report.
	Keep bool
	// TempDir is where the state directory is made; "" for os.TempDir().
	TempDir string
	// Trace, when not nil, receives the wire transcript as the run goes
	// (--trace), one WriteTrace line per message, so a run killed midway
	// keeps what it recorded until then.
	Trace io.Writer
}

// Run certifies the package in cfg.Dir: it loads the manifest, makes a
// fresh state directory, runs each selected criterion that applies under
// its deadline, and reports every selected criterion exactly once. The
// error is non-nil for a usage error (wrapping ErrUsage: a bad directory,
// selection or baseline), when ctx ends before the run does (the report
// then holds what ran, the rest as harness errors), or when the report
// fails its own consistency check.
func Run(ctx context.Context, cfg Config) (Report, error) {
	all := cfg.Criteria
	if all == nil {
		all = Criteria()
	}
	if err := checkCriteria(all); err != nil {
		return Report{}, err
	}
	selected := all
	if cfg.Select != nil {
		selected = nil
		for _, c := range all {
			if cfg.Select.MatchString(c.ID) {
				selected = append(selected, c)
			}
		}
		if len(selected) == 0 {
			return Report{}, usagef("--run %q selects no criterion", cfg.Select.String())
		}
	}
	baseline, err := checkBaseline(cfg.Baseline, all)
	if err != nil {
		return Report{}, err
	}
	if cfg.Dir == "" {
		return Report{}, usagef("no package directory")
	}
	if err := checkDir(cfg.Dir); err != nil {
		return Report{}, err
	}

	r := &runner{
		timeout:  orDefault(cfg.Timeout, DefaultTimeout),
		grace:    orDefault(cfg.Grace, DefaultGrace),
		progress: cfg.Progress,
		baseline: baseline,
		now:      time.Now,
	}
	if testHook != nil {
		testHook(r)
	}
	report := Report{
		CriteriaVersion: CriteriaVersion,
		Package:         PackageInfo{Dir: cfg.Dir},
		HostProtocol:    protocol.SupportedVersions(),
		Started:         r.now(),
	}
	if cfg.Select != nil {
		report.Select = cfg.Select.String()
	}

	s := &session{launch: cfg.Launch, sem: make(chan struct{}, 1)}
	s.manifest, s.manifestErr = protocol.LoadManifest(cfg.Dir)
	if m := s.manifest; m != nil {
		report.Package.Name, report.Package.Version, report.Package.Protocol = m.Name, m.Version, m.Protocol
	} else if m, err := protocol.DecodeManifest(readManifest(cfg.Dir)); err == nil {
		// An invalid manifest still names the package when it decodes.
		report.Package.Name, report.Package.Version = m.Name, m.Version
	}
	var inputs *conformance.Inputs
	if s.manifest != nil {
		if inputs, err = conformance.LoadInputs(cfg.Dir, s.manifest); err != nil {
			return Report{}, usagef("%v", err)
		}
	}
	stateDir, err := os.MkdirTemp(cfg.TempDir, "open-conduit-certify-")
	if err != nil {
		s.stateErr = err
	} else if cfg.Keep {
		report.StateDir = stateDir
	} else {
		defer os.RemoveAll(stateDir)
	}
	s.spec = LaunchSpec{Dir: cfg.Dir, Manifest: s.manifest, StateDir: stateDir, Inputs: inputs, Trace: cfg.Trace}

	if s.manifest == nil && r.progress != nil {
		// The cause first: nothing but manifest/valid runs without one.
		fmt.Fprintf(r.progress, "the manifest did not load: %s\nno other criterion runs; `open-conduit extension validate %s` lists every refusal\n\n",
			firstLine(s.manifestErr.Error()), cfg.Dir)
	}
	var interrupted error
	for _, c := range selected {
		t := &Target{Dir: cfg.Dir, Manifest: s.manifest, StateDir: stateDir, session: s}
		var res Result
		if err := ctx.Err(); err != nil {
			interrupted = err
			res = Result{ID: c.ID, Title: c.Title, Section: c.Section, Status: StatusHarnessError,
				Detail: "not run: the run was interrupted (" + err.Error() + ")"}
		} else {
			res = r.criterion(ctx, c, t)
		}
		r.applyBaseline(&res)
		r.broken(&res)
		report.Results = append(report.Results, res)
		if r.progress != nil {
			WriteProgress(r.progress, res)
		}
	}
	if p := s.current(); p != nil {
		r.bounded(context.WithoutCancel(ctx), "stop", func(ctx context.Context) error { return p.Stop(ctx) })
		report.Trace = normalizeWire(p.Trace())
		report.ProtocolVersion = p.ProtocolVersion()
	}
	report.Duration = r.now().Sub(report.Started)
	report.Summary = Summarize(report.Results)
	report.Uncovered = coverage(s.manifest, report.Trace, cfg.Select != nil)
	report.Summary.Uncovered = len(report.Uncovered)
	if err := report.Check(); err != nil {
		return report, fmt.Errorf("certify: the report is inconsistent: %w", err)
	}
	if interrupted != nil {
		return report, interrupted
	}
	return report, nil
}

// checkDir refuses a package directory that is not there, the same way
// for a run and for --list.
func checkDir(dir string) error {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return usagef("no such directory: %s", dir)
	case err != nil:
		return usagef("package directory: %v", err)
	case !info.IsDir():
		return usagef("%s is not a directory", dir)
	}
	return nil
}

// testHook lets tests break the runner on purpose (negative controls).
var testHook func(*runner)

// runner runs criteria one at a time.
type runner struct {
	timeout, grace time.Duration
	progress       io.Writer
	baseline       map[string]bool
	now            func() time.Time
	// sabotage, set only by tests, corrupts a result after it is decided.
	sabotage func(*Result)
}

func (r *runner) broken(res *Result) {
	if r.sabotage != nil {
		r.sabotage(res)
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// criterion decides one criterion's result.
func (r *runner) criterion(ctx context.Context, c Criterion, t *Target) Result {
	res := Result{ID: c.ID, Title: c.Title, Section: c.Section}
	if t.Manifest == nil && c.ID != manifestCriterion {
		res.Status, res.Detail = StatusNotRun, "the manifest did not load; see "+manifestCriterion
		return res
	}
	if t.Manifest != nil {
		if ok, reason := c.applies(t.Manifest); !ok {
			if reason == "" {
				reason = "it does not apply to what the manifest declares"
			}
			res.Status, res.Detail = StatusSkip, reason
			return res
		}
	}
	start := r.now()
	traceStart := 0
	if p := t.session.current(); p != nil {
		traceStart = len(p.Trace())
	}
	var err error
	res.Status, res.Detail, err = r.execute(ctx, c, t)
	res.Duration = r.now().Sub(start)
	if res.Status == StatusSkip {
		// A suite found nothing to check: a skip reports no run time.
		res.Duration = 0
	}
	r.afterCriterion(t.session, &res, traceStart, err)
	return res
}

// manifestCriterion is the one criterion that runs when the manifest did
// not load.
const manifestCriterion = "manifest/valid"

// panicError is a criterion's panic, which is the harness's fault.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string {
	return fmt.Sprintf("the criterion panicked: %v\n%s", p.value, p.stack)
}

// execute runs c under its deadline and classifies how it ended; err is
// what the criterion returned, for its evidence.
func (r *runner) execute(ctx context.Context, c Criterion, t *Target) (st Status, detail string, err error) {
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	done := make(chan error, 1) // buffered: an abandoned criterion never blocks sending
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- &panicError{value: v, stack: debug.Stack()}
			}
		}()
		done <- c.run(cctx, t)
	}()
	select {
	case err = <-done:
	case <-cctx.Done():
		grace := time.NewTimer(r.grace)
		defer grace.Stop()
		select {
		case err = <-done:
		case <-grace.C:
			t.abandoned.Store(true)
			t.session.markHung()
			if ctx.Err() != nil {
				return StatusHarnessError, "interrupted: the run was cancelled while the criterion ran", err
			}
			return StatusFail, fmt.Sprintf("criterion %s timed out after %v and did not return within %v more; abandoned", c.ID, r.timeout, r.grace), err
		}
	}
	var p *panicError
	switch {
	case errors.As(err, &p):
		return StatusHarnessError, p.Error(), err
	case err == nil:
		return StatusPass, "", err
	case ctx.Err() != nil:
		return StatusHarnessError, "interrupted: the run was cancelled while the criterion ran: " + err.Error(), err
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		t.session.markHung()
		msg := fmt.Sprintf("criterion %s timed out after %v", c.ID, r.timeout)
		if !errors.Is(err, context.DeadlineExceeded) {
			msg += ": " + err.Error()
		}
		return StatusFail, msg, err
	case errors.Is(err, ErrHarness):
		return StatusHarnessError, err.Error(), err
	case errors.Is(err, ErrNotApplicable):
		return StatusSkip, skipReason(err), err
	default:
		return StatusFail, err.Error(), err
	}
}

// afterCriterion fails a criterion during which the package crashed, and
// attaches evidence to every failure and harness error: the wire around
// the message the failure names (conformance.WireIndex), or else the last
// messages recorded while the criterion ran (from traceStart on).
func (r *runner) afterCriterion(s *session, res *Result, traceStart int, err error) {
	p := s.current()
	if p == nil {
		return
	}
	if exited, cause := p.Exited(); exited && cause != nil && s.blame() {
		crash := "the package exited during the criterion: " + cause.Error()
		switch res.Status {
		case StatusPass:
			res.Status, res.Detail = StatusFail, crash
		case StatusFail, StatusHarnessError:
			res.Detail += "\n" + crash
		}
	}
	if res.Status == StatusFail || res.Status == StatusHarnessError {
		ev := &Evidence{Stderr: tailBytes(p.StderrTail(), EvidenceStderrBytes)}
		trace := p.Trace()
		if at, ok := conformance.WireIndex(err); ok && at >= 0 && at < len(trace) {
			from, to := max(0, at-EvidenceAround), min(len(trace), at+EvidenceAround+1)
			ev.Wire, ev.At, ev.From = normalizeWire(trace[from:to]), at+1, from+1
		} else {
			from := min(traceStart, len(trace))
			ev.Wire = normalizeWire(trace[max(from, len(trace)-EvidenceMessages):])
		}
		if len(ev.Wire) > 0 || ev.Stderr != "" {
			res.Evidence = ev
		}
	}
}

// applyBaseline relates a result to the baseline.
func (r *runner) applyBaseline(res *Result) {
	if !r.baseline[res.ID] {
		return
	}
	switch res.Status {
	case StatusFail:
		res.Baseline = BaselineKnownFailure
	case StatusPass, StatusSkip:
		res.Baseline = BaselineStale
	case StatusHarnessError, StatusNotRun:
		res.Baseline = BaselineListed
	}
}

// bounded runs f under the runner's deadline and abandons it after grace.
func (r *runner) bounded(ctx context.Context, what string, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- fmt.Errorf("%s panicked: %v", what, v)
			}
		}()
		done <- f(ctx)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	grace := time.NewTimer(r.grace)
	defer grace.Stop()
	select {
	case err := <-done:
		return err
	case <-grace.C:
		return fmt.Errorf("%s did not return within %v", what, r.timeout+r.grace)
	}
}

// session holds the one Package of a run.
type session struct {
	launch      LaunchFunc
	spec        LaunchSpec
	manifest    *protocol.Manifest
	manifestErr error
	stateErr    error
	sem         chan struct{} // held while the package starts or restarts

	mu      sync.Mutex
	pkg     Package
	restart bool // the package hung or crashed: restart it before its next use
	blamed  bool // the package's last exit has failed a criterion already
}

func (s *session) current() Package {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pkg
}

// blame reports whether a crash is still to be blamed on the criterion that
// saw it: each exit fails one criterion, not every one after it until the
// next restart.
func (s *session) blame() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.blamed {
		return false
	}
	s.blamed, s.restart = true, true
	return true
}

// started records a successful start or restart.
func (s *session) started() {
	s.mu.Lock()
	s.restart, s.blamed = false, false
	s.mu.Unlock()
}

func (s *session) markHung() {
	s.mu.Lock()
	s.restart = true
	s.mu.Unlock()
}

func (s *session) get(ctx context.Context, t *Target) (Package, error) {
	if s.stateErr != nil {
		return nil, Harnessf("the temporary state directory could not be made: %w", s.stateErr)
	}
	if s.launch == nil {
		return nil, &harnessError{err: errors.New("no package launcher is wired into certify yet"), notWired: true}
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the package to start: %w", ctx.Err())
	}
	defer func() { <-s.sem }()
	s.mu.Lock()
	p, restart := s.pkg, s.restart
	s.mu.Unlock()
	if p == nil {
		p, err := s.launch(ctx, s.spec)
		if err != nil {
			if errors.Is(err, ErrHarness) {
				return nil, err
			}
			return nil, fmt.Errorf("the package could not be launched: %w", err)
		}
		if p == nil {
			return nil, Harnessf("the launcher returned no package")
		}
		s.mu.Lock()
		s.pkg = p
		s.mu.Unlock()
		if err := p.Start(ctx); err != nil {
			s.markHung()
			return nil, fmt.Errorf("the package did not start: %w", err)
		}
		s.started()
		return p, nil
	}
	if exited, _ := p.Exited(); exited || restart {
		if err := p.Restart(ctx); err != nil {
			s.markHung()
			return nil, fmt.Errorf("the package did not restart: %w", err)
		}
		s.started()
	}
	return p, nil
}

// readManifest reads the manifest file for naming an invalid package, no
// more than the size limit of it; nil when it cannot be read or is too big.
func readManifest(dir string) []byte {
	data, err := protocol.ReadManifestFile(filepath.Join(dir, protocol.ManifestFile))
	if err != nil {
		return nil
	}
	return data
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
