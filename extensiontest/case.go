package extensiontest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/protocol"
)

// KeepEnv, set to 1, keeps every case's work directory; a failing case's
// is always kept. Either way its path is printed.
const KeepEnv = "OPEN_CONDUIT_KEEP"

// DefaultStart is where a case's test clock stands when it starts.
var DefaultStart = time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC)

// DefaultTimeout bounds a step's wait for its checks to hold.
var DefaultTimeout = 30 * time.Second

// Evidence sizes: the lines of each log tail a failure shows.
const evidenceLines = 30

// Case is one test of a package against the real daemon: one daemon with
// its own config and state directories, the package installed, and a
// scope generated from the manifests (see Generate), then the steps in
// order.
type Case struct {
	// Package is the directory of the package under test: its manifest
	// at the top. When the directory is a Go main package, it is built
	// (go build, in the directory's module) as the manifest's command.
	Package string
	// Also are more package directories installed beside it (an
	// executor the package's Work runs on, another package it talks to).
	Also []string
	// Config edits the generated configuration before the daemon starts.
	Config func(*Config)
	// Env is added to the daemon's environment: what env: secret
	// references and settings.pass_env name.
	Env []string
	// Start is where the test clock stands at the start (default
	// DefaultStart); it moves only through Step.Advance.
	Start time.Time
	// Timeout bounds each step's wait for its checks (default
	// DefaultTimeout).
	Timeout time.Duration
	Steps   []Step
}

// Step is one step of a case: its actions, in the order of the fields
// below, then its checks, which are waited for on the daemon's change
// stream until they hold or the step's timeout passes.
type Step struct {
	// Name and Description say what the step does and why; a failure
	// names the step by its number and Name first.
	Name        string
	Description string

	// Config edits the running configuration; the result is applied as
	// a new generation.
	Config func(*Config)
	// ConfigDoc is applied as it is, instead of the running configuration
	// (for a refusal: broken JSON, an unknown field).
	ConfigDoc []byte
	// Refused says the apply must be refused with these diagnostics
	// (each matched by Path and Rule, and Message as a substring when
	// set); without it a refusal fails the step.
	Refused []client.Diagnostic
	// Agent is the scripted agent's script from this step on: the
	// binding AgentBinding's executor config, applied as a new
	// generation.
	Agent []AgentStep
	// Do is any other action, run after the configuration is applied and
	// before the actions below (write the files a reconcile reads, call
	// the API through h.Client()).
	Do func(ctx context.Context, h *H) error

	// Update installs the package in this directory (a new release of the
	// same name) over the package under test while the daemon runs, and
	// has it reload the package (POST /v1/packages/reload): the new
	// release's configure runs its KV migration before the step goes on.
	Update string
	// Restart stops the daemon in order and starts it again on the same
	// state; Crash kills it (SIGKILL) first instead.
	Restart, Crash bool
	// KillPackage kills the named package's process group (SIGKILL); the
	// step goes on once the daemon has restarted it.
	KillPackage string

	// Webhook is delivered to the daemon's webhook listener.
	Webhook *Webhook
	// Reconcile runs one reconcile scan of this ingress source now.
	Reconcile string
	// Advance moves the daemon's test clock forward.
	Advance time.Duration

	// Expect are the step's checks.
	Expect []Check
}

// StepError is how a case fails: the step's number (from 1) and name
// first, then what was expected and what was found, then the evidence.
type StepError struct {
	Step        int
	Name        string
	Description string
	// Expected and Found are the failing check's (or action's) words.
	Expected, Found string
	// Evidence is the step's transcript, the agent's transcript and the
	// daemon's and the package's log tails.
	Evidence string
	// Dir is the kept work directory.
	Dir string
}

func (e *StepError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d %q failed", e.Step, e.Name)
	if e.Description != "" {
		fmt.Fprintf(&b, " (%s)", e.Description)
	}
	fmt.Fprintf(&b, "\n  expected: %s\n  found:    %s\n", e.Expected, indentAfterFirst(e.Found, "            "))
	if e.Evidence != "" {
		b.WriteString(e.Evidence)
	}
	if e.Dir != "" {
		fmt.Fprintf(&b, "work directory kept: %s\n", e.Dir)
	}
	return b.String()
}

// H is a running case's handle, for Step.Do and custom checks.
type H struct {
	d       *daemon
	pkg     string // the package under test's name
	cfg     Config // the configuration last applied
	tb      testing.TB
	scratch string // the work directory

	// agentMark is the agent transcript's size when the step began.
	agentMark int64
	// wireMarks is each package's wire log size when the step began.
	wireMarks map[string]int64

	mu         sync.Mutex
	transcript []string // the step's actions and changes, one line each
}

// Client is the management API's client of the running daemon (a new one
// after a restart).
func (h *H) Client() *client.Client { return h.d.client }

// ConfigDir and StateDir are the daemon's directories.
func (h *H) ConfigDir() string { return h.d.configDir }
func (h *H) StateDir() string  { return h.d.stateDir }

// Package is the name of the package under test.
func (h *H) Package() string { return h.pkg }

// Config is a copy of the configuration last applied.
func (h *H) Config() Config { return cloneConfig(h.cfg) }

// Logf adds a line to the step's transcript.
func (h *H) Logf(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.transcript = append(h.transcript, fmt.Sprintf(format, args...))
}

// Apply applies cfg as a new generation.
func (h *H) Apply(ctx context.Context, cfg Config) (client.Generation, error) {
	doc, err := json.Marshal(cfg)
	if err != nil {
		return client.Generation{}, err
	}
	gen, err := h.d.client.ApplyConfig(ctx, doc)
	if err == nil {
		h.cfg = cloneConfig(cfg)
		h.Logf("config applied: generation %d", gen.Number)
	}
	return gen, err
}

// Test runs c and fails t at its first failing step.
func Test(t *testing.T, c Case) {
	t.Helper()
	if err := Run(t, c); err != nil {
		t.Fatal(err)
	}
}

// Run runs c and returns its first failing step as a *StepError (or an
// error setting the case up). It is Test for a test that expects a failure
// and checks its message.
func Run(tb testing.TB, c Case) error {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		return fmt.Errorf("extensiontest: %w", err)
	}
	h, err := setUp(tb, bin, c)
	if err != nil {
		return err
	}
	failed := true
	defer func() { h.finish(failed) }()
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	for i, st := range c.Steps {
		if err := h.step(st, timeout); err != nil {
			err.Step, err.Name, err.Description = i+1, st.Name, st.Description
			err.Evidence = h.evidence()
			err.Dir = h.scratch
			return err
		}
	}
	failed = false
	return nil
}

// setUp makes the work directory, installs the packages, writes the
// generated configuration and starts the daemon.
func setUp(tb testing.TB, bin string, c Case) (*H, error) {
	if c.Package == "" {
		return nil, errors.New("extensiontest: Case.Package is required: the directory of the package under test")
	}
	scratch, err := os.MkdirTemp("", "oc-et-")
	if err != nil {
		return nil, err
	}
	h := &H{tb: tb, scratch: scratch}
	d := &daemon{bin: bin, configDir: filepath.Join(scratch, "config"), stateDir: filepath.Join(scratch, "state"),
		env: c.Env, clockAt: c.Start}
	if d.clockAt.IsZero() {
		d.clockAt = DefaultStart
	}
	h.d = d
	fail := func(err error) (*H, error) {
		h.finish(true)
		return nil, fmt.Errorf("extensiontest: setting up %s: %w (work directory kept: %s)", c.Package, err, scratch)
	}
	var manifests []*protocol.Manifest
	for i, dir := range append([]string{c.Package}, c.Also...) {
		m, err := install(d.configDir, dir)
		if err != nil {
			return fail(err)
		}
		if i == 0 {
			h.pkg = m.Name
		}
		manifests = append(manifests, m)
	}
	agentDir := filepath.Join(d.configDir, "extensions", Agent)
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(agentDir, protocol.ManifestFile), []byte(agentManifest), 0o644); err != nil {
		return fail(err)
	}
	h.cfg = Generate(manifests...)
	if c.Config != nil {
		c.Config(&h.cfg)
	}
	doc, err := json.MarshalIndent(h.cfg, "", "  ")
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(d.configDir, "config.json"), doc, 0o600); err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(d.stateDir, 0o700); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	if err := d.start(ctx); err != nil {
		return fail(fmt.Errorf("%v\ndaemon log:\n%s", err, indent(d.logTail(evidenceLines), "  ")))
	}
	return h, nil
}

// finish stops the daemon and removes the work directory, or keeps it
// and says where.
func (h *H) finish(failed bool) {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	if err := h.d.stop(ctx); err != nil {
		h.tb.Logf("extensiontest: stopping the daemon: %v", err)
	}
	if failed || os.Getenv(KeepEnv) == "1" {
		h.tb.Logf("extensiontest: work directory kept: %s", h.scratch)
		return
	}
	os.RemoveAll(h.scratch)
}

// step runs one step's actions, then waits for its checks.
func (h *H) step(st Step, timeout time.Duration) *StepError {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	h.mu.Lock()
	h.transcript = nil
	h.mu.Unlock()
	h.agentMark = h.agentSize()
	h.wireMarks = h.d.wireSizes()
	mark, err := h.latestChange(ctx)
	if err != nil {
		return &StepError{Expected: "a daemon that answers", Found: err.Error()}
	}
	if serr := h.act(ctx, st); serr != nil {
		return serr
	}
	return h.await(ctx, mark, st.Expect)
}

// latestChange is the change log's last Seq now.
func (h *H) latestChange(ctx context.Context) (int64, error) {
	page, err := h.d.client.Events(ctx, client.EventQuery{Limit: 1})
	return page.LatestChange, err
}

// act runs the step's actions in their order.
func (h *H) act(ctx context.Context, st Step) *StepError {
	actionFailed := func(what string, err error) *StepError {
		return &StepError{Expected: what, Found: err.Error()}
	}
	if st.Config != nil || st.ConfigDoc != nil || st.Agent != nil {
		if serr := h.applyStep(ctx, st); serr != nil {
			return serr
		}
	}
	if st.Do != nil {
		if err := st.Do(ctx, h); err != nil {
			return actionFailed("the step's Do to succeed", err)
		}
	}
	if st.Update != "" {
		if err := h.update(ctx, st.Update); err != nil {
			return actionFailed("package "+h.pkg+" to be updated to the release in "+st.Update, err)
		}
	}
	if st.Restart || st.Crash {
		if st.Crash {
			h.Logf("crash: the daemon is killed (SIGKILL)")
			h.d.kill()
		} else {
			h.Logf("restart: the daemon stops in order")
			if err := h.d.stop(ctx); err != nil {
				return actionFailed("the daemon to stop in order", err)
			}
		}
		if err := h.d.start(ctx); err != nil {
			return actionFailed("the daemon to start again", err)
		}
		h.Logf("restart: the daemon is ready again")
	}
	if st.KillPackage != "" {
		if err := h.killPackage(ctx, st.KillPackage); err != nil {
			return actionFailed("package "+st.KillPackage+" to be killed and restarted", err)
		}
	}
	if st.Webhook != nil {
		if err := h.deliver(ctx, st.Webhook); err != nil {
			return actionFailed("the webhook delivery to "+st.Webhook.Path+" to be answered "+st.Webhook.wantStatus(), err)
		}
	}
	if st.Reconcile != "" {
		res, err := h.d.client.Reconcile(ctx, st.Reconcile)
		if err != nil {
			return actionFailed("a reconcile scan of "+st.Reconcile, err)
		}
		h.Logf("reconcile %s: %d observed, %d accepted, complete %v", st.Reconcile, res.Observed, len(res.Accepted), res.Complete)
	}
	if st.Advance != 0 {
		cs, err := h.d.client.AdvanceClock(ctx, st.Advance)
		if err != nil {
			return actionFailed("the test clock to advance by "+st.Advance.String(), err)
		}
		h.Logf("clock advanced by %s to %s", st.Advance, cs.Now.Format(time.RFC3339))
	}
	return nil
}

// applyStep applies the step's configuration and holds the answer to
// Refused.
func (h *H) applyStep(ctx context.Context, st Step) *StepError {
	next := cloneConfig(h.cfg)
	if st.Config != nil {
		st.Config(&next)
	}
	if st.Agent != nil {
		sc := next.Scope(Scope)
		var b *BindingConfig
		if sc != nil {
			b = sc.Binding(AgentBinding)
		}
		if b == nil {
			return &StepError{Expected: "the binding " + AgentBinding + " in scope " + Scope + " for the agent's script",
				Found: "the configuration has none (a Config edit removed it?)"}
		}
		b.ExecutorConfig = map[string]any{"script": st.Agent}
	}
	doc := st.ConfigDoc
	if doc == nil {
		var err error
		if doc, err = json.Marshal(next); err != nil {
			return &StepError{Expected: "a configuration that encodes", Found: err.Error()}
		}
	}
	gen, err := h.d.client.ApplyConfig(ctx, doc)
	var apiErr *client.Error
	refused := errors.As(err, &apiErr) && apiErr.Code == client.CodeConfigInvalid
	switch {
	case err != nil && !refused:
		return &StepError{Expected: "the configuration to be applied", Found: err.Error()}
	case refused && st.Refused == nil:
		return &StepError{Expected: "the configuration to be applied", Found: "refused:\n" + diagnosticLines(apiErr.Diagnostics)}
	case !refused && st.Refused != nil:
		return &StepError{Expected: "the configuration to be refused with:\n" + diagnosticLines(st.Refused),
			Found: fmt.Sprintf("applied as generation %d", gen.Number)}
	case refused:
		h.Logf("config refused with %d diagnostics", len(apiErr.Diagnostics))
		if missing := missingDiagnostics(st.Refused, apiErr.Diagnostics); len(missing) > 0 {
			return &StepError{Expected: "the configuration to be refused with:\n" + diagnosticLines(missing),
				Found: "refused with:\n" + diagnosticLines(apiErr.Diagnostics)}
		}
		return nil
	}
	if st.ConfigDoc == nil {
		h.cfg = next
	}
	h.Logf("config applied: generation %d", gen.Number)
	return nil
}

func missingDiagnostics(want, got []client.Diagnostic) []client.Diagnostic {
	var missing []client.Diagnostic
	for _, w := range want {
		found := false
		for _, g := range got {
			if g.Path == w.Path && g.Rule == w.Rule && strings.Contains(g.Message, w.Message) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, w)
		}
	}
	return missing
}

func diagnosticLines(ds []client.Diagnostic) string {
	var lines []string
	for _, d := range ds {
		lines = append(lines, fmt.Sprintf("%s: %s: %s", d.Path, d.Rule, d.Message))
	}
	if len(lines) == 0 {
		return "no diagnostics"
	}
	return strings.Join(lines, "\n")
}

// update installs the release in dir over the package under test while
// the daemon runs and has the daemon reload it: the old process stops,
// the new one starts and is configured, running its KV migration, before
// the reload answers.
func (h *H) update(ctx context.Context, dir string) error {
	m, err := install(h.d.configDir, dir)
	if err != nil {
		return err
	}
	if m.Name != h.pkg {
		return fmt.Errorf("%s holds package %s, not %s", dir, m.Name, h.pkg)
	}
	res, err := h.d.client.ReloadPackages(ctx, []string{h.pkg})
	if err != nil {
		return fmt.Errorf("reloading: %w", err)
	}
	h.Logf("update: %s %s installed from %s; reload restarted %v, started %v", m.Name, m.Version, dir, res.Restarted, res.Started)
	for _, w := range res.Warnings {
		h.Logf("update: reload warning: %s", w)
	}
	for _, p := range res.Packages {
		if p.Name != h.pkg {
			continue
		}
		if p.Version != m.Version || p.State != "ready" {
			return fmt.Errorf("after the reload %s is %s %s (%s)", p.Name, p.Version, p.State, p.LastError)
		}
		return nil
	}
	return fmt.Errorf("after the reload the daemon has no package %s", h.pkg)
}

// killPackage kills a package's process group and waits until the daemon
// has restarted it. Package restarts are not on the change stream, so
// this reads the daemon's status until the restart shows, bounded by ctx.
func (h *H) killPackage(ctx context.Context, name string) error {
	page, err := h.d.client.Events(ctx, client.EventQuery{Limit: 1})
	if err != nil {
		return err
	}
	mark := page.LatestChange // read before the status: no later change is missed
	st, err := h.d.client.Status(ctx)
	if err != nil {
		return err
	}
	var before client.Package
	for _, p := range st.Packages {
		if p.Name == name {
			before = p
		}
	}
	switch {
	case before.Name == "":
		return fmt.Errorf("the daemon has no package %s: %s", name, packagesLine(st))
	case before.PID <= 0:
		return fmt.Errorf("package %s has no running process (state %s)", name, before.State)
	}
	if err := syscall.Kill(-before.PID, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 of process group %d: %v", before.PID, err)
	}
	h.Logf("package %s: process group %d killed (SIGKILL)", name, before.PID)
	// The daemon's journal puts each state of the package on the change
	// stream; one from before the kill is told apart by its restarts and
	// its PID, so the stream is read from the log's end at the status.
	var last client.PackageChange
	_, err = h.d.client.WaitFor(ctx, client.ChangeQuery{After: mark}, func(ch client.Change) bool {
		if ch.Package == nil || ch.Package.Name != name {
			return false
		}
		last = *ch.Package
		return last.Restarts > before.Restarts && last.State == "ready" && last.PID != before.PID
	})
	if err != nil {
		return fmt.Errorf("package %s was not restarted in time (last seen: state %q, restarts %d, pid %d): %w",
			name, last.State, last.Restarts, last.PID, err)
	}
	h.Logf("package %s: restarted as pid %d (restarts %d)", name, last.PID, last.Restarts)
	return nil
}

// agentTranscriptFile is the scripted agent's transcript in its executor
// directory (extensions/agent's TranscriptFile).
const agentTranscriptFile = "transcript.jsonl"

// agentTranscript is the scripted agent's transcript in the state
// directory.
func (h *H) agentTranscript() string {
	return filepath.Join(h.d.stateDir, "executors", Agent, agentTranscriptFile)
}

func (h *H) agentSize() int64 {
	info, err := os.Stat(h.agentTranscript())
	if err != nil {
		return 0
	}
	return info.Size()
}

// evidence is what a failure shows after its message.
func (h *H) evidence() string {
	var b strings.Builder
	section := func(title, body string) {
		body = strings.TrimRight(body, "\n")
		if body == "" {
			body = "(empty)"
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", title, indent(body, "  "))
	}
	h.mu.Lock()
	section("step transcript", strings.Join(h.transcript, "\n"))
	h.mu.Unlock()
	section("agent transcript (this step)", h.agentSince(h.agentMark))
	for _, name := range h.wirePackages() {
		section(fmt.Sprintf("wire (package %s, this step, last %d lines)", name, evidenceLines), h.wireSince(name))
	}
	section(fmt.Sprintf("daemon log (last %d lines)", evidenceLines), h.d.logTail(evidenceLines))
	section(fmt.Sprintf("package %s stderr (last %d lines)", h.pkg, evidenceLines), h.d.packageLog(h.pkg, evidenceLines))
	return b.String()
}

func (h *H) agentSince(offset int64) string {
	f, err := os.Open(h.agentTranscript())
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	data, _ := io.ReadAll(io.LimitReader(f, 64<<10))
	return string(data)
}

func indent(s, prefix string) string {
	if s == "" {
		return s
	}
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

func indentAfterFirst(s, prefix string) string {
	return strings.ReplaceAll(s, "\n", "\n"+prefix)
}
