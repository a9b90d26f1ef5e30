package certify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/open-conduit/open-conduit/host/daemon"
	"github.com/open-conduit/open-conduit/host/faultproxy"
)

// The robustness pass (extension certify --faults): the selected criteria
// run again once per rule of FaultRules, each time with the rule armed on
// the JSON-RPC fault proxy (host/faultproxy) between the host and the
// package. A package must survive each fault or fail cleanly: every
// criterion must end on its own, never by its deadline (a hang), and the
// harness must not break. A criterion that fails under a fault (the
// package crashed, refused a broken line, lost a call the fault cut) is a
// clean failure and does not fail the pass.
//
// The rules fault what the host sends and the package's life, the side a
// package must withstand: a late, doubled or reordered request, a line
// that is not JSON (the transport's rule is that it ends the connection),
// a SIGKILL mid-run, a stdout that ends. Faults that lose a request
// outright would leave the host waiting on a call the package never saw,
// which says nothing about the package, so none of them is in the list.

// FaultRules are the robustness pass's rules, in the order they run.
var FaultRules = []string{
	"delay dir=to-ext kind=request for=50ms",
	"duplicate dir=to-ext kind=request nth=2",
	"reorder dir=to-ext nth=3",
	"corrupt dir=to-ext kind=request nth=4",
	"crash kind=request nth=5",
	"close-stdout dir=to-host nth=6",
}

// FaultVerdict is how a package came through one rule.
type FaultVerdict string

const (
	// FaultSurvived: every criterion that ran ended as it would have
	// without the fault, or passed.
	FaultSurvived FaultVerdict = "survived"
	// FaultFailedCleanly: some criteria failed, each on its own account
	// (an error, a crash the host saw), none by its deadline.
	FaultFailedCleanly FaultVerdict = "failed_cleanly"
	// FaultHung: a criterion ran into its deadline under the fault.
	FaultHung FaultVerdict = "hung"
	// FaultHarnessError: the runner broke; nothing is known.
	FaultHarnessError FaultVerdict = "harness_error"
	// FaultNotExercised: the rule never fired (no message it matches
	// crossed), so the run says nothing of it: never a survival.
	FaultNotExercised FaultVerdict = "not_exercised"
)

// FaultResult is one rule's pass.
type FaultResult struct {
	Rule    string       `json:"rule"`
	Verdict FaultVerdict `json:"verdict"`
	// Fired is how many times the rule acted over the pass.
	Fired int `json:"fired"`
	// Failed, Hung and Broken name the criteria that failed cleanly, ran
	// into their deadline, or ended as harness errors.
	Failed []string `json:"failed,omitempty"`
	Hung   []string `json:"hung,omitempty"`
	Broken []string `json:"harness_errors,omitempty"`
	// Results are the criteria's results under the rule.
	Results []Result `json:"-"`
}

// CheckFaultRule checks a rule's text as RunFaults will parse it.
func CheckFaultRule(text string) error {
	_, err := faultproxy.ParseRule(text)
	return err
}

// faultArm is what a hostPackage of the robustness pass carries: the rule
// it arms on every daemon it composes, and how often it fired there.
type faultArm struct {
	rule faultproxy.Rule

	mu    sync.Mutex
	fired int
}

// arm arms the rule on the package name of d (composed with TestFaults).
// A nil arm arms nothing.
func (a *faultArm) arm(d *daemon.Daemon, name string) error {
	if a == nil {
		return nil
	}
	if _, err := d.InjectFault(name, a.rule.String()); err != nil {
		return Harnessf("arming the fault %q: %w", a.rule.String(), err)
	}
	return nil
}

// collect adds up what the rule did on d before d closes.
func (a *faultArm) collect(d *daemon.Daemon, name string) {
	if a == nil || d == nil {
		return
	}
	st, err := d.Faults(name)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range st.Rules {
		a.fired += r.Fired
	}
}

// faultLaunch is launch with the rule armed on every package it makes
// (HostLaunch's; any other launcher cannot carry a proxy).
func faultLaunch(launch LaunchFunc, a *faultArm) LaunchFunc {
	return func(ctx context.Context, spec LaunchSpec) (Package, error) {
		p, err := launch(ctx, spec)
		if err != nil {
			return p, err
		}
		hp, ok := p.(*hostPackage)
		if !ok {
			return nil, Harnessf("the robustness pass needs the host's launcher (HostLaunch), not %T", p)
		}
		hp.faults = a
		return hp, nil
	}
}

// RunFaults runs the robustness pass: cfg's run once per rule, the rule
// armed on the proxy, each judged by FaultVerdict. progress, when not nil,
// gets a line per rule.
func RunFaults(ctx context.Context, cfg Config, rules []string, progress io.Writer) ([]FaultResult, error) {
	if cfg.Launch == nil {
		return nil, Harnessf("the robustness pass needs a launcher")
	}
	cfg.Trace, cfg.Keep, cfg.Progress = nil, false, nil
	var out []FaultResult
	for _, text := range rules {
		r, err := faultproxy.ParseRule(text)
		if err != nil {
			return out, usagef("fault rule %q: %v", text, err)
		}
		arm := &faultArm{rule: r}
		c := cfg
		c.Launch = faultLaunch(cfg.Launch, arm)
		report, err := Run(ctx, c)
		res := JudgeFaults(r.String(), report)
		arm.mu.Lock()
		res.Fired = arm.fired
		arm.mu.Unlock()
		if res.Fired == 0 && (res.Verdict == FaultSurvived || res.Verdict == FaultFailedCleanly) {
			res.Verdict = FaultNotExercised
		}
		if err != nil && res.Verdict != FaultHung {
			res.Verdict = FaultHarnessError
			res.Broken = append(res.Broken, err.Error())
		}
		out = append(out, res)
		if progress != nil {
			writeFaultLine(progress, res)
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

// JudgeFaults reads the report of the run under rule: any criterion that
// ran into its deadline is a hang, any harness error breaks the pass, any
// other failure is clean.
func JudgeFaults(rule string, report Report) FaultResult {
	res := FaultResult{Rule: rule, Verdict: FaultSurvived, Results: report.Results}
	for _, r := range report.Results {
		switch {
		case r.Status == StatusFail && strings.Contains(r.Detail, " timed out after "):
			res.Hung = append(res.Hung, r.ID)
		case r.Status == StatusFail:
			res.Failed = append(res.Failed, r.ID)
		case r.Status == StatusHarnessError:
			res.Broken = append(res.Broken, r.ID)
		}
	}
	switch {
	case len(res.Hung) > 0:
		res.Verdict = FaultHung
	case len(res.Broken) > 0:
		res.Verdict = FaultHarnessError
	case len(res.Failed) > 0:
		res.Verdict = FaultFailedCleanly
	}
	return res
}

func writeFaultLine(w io.Writer, r FaultResult) {
	line := fmt.Sprintf("FAULT %-14s %s (fired %d)", r.Verdict, r.Rule, r.Fired)
	for _, part := range []struct {
		what string
		ids  []string
	}{{"hung", r.Hung}, {"harness errors", r.Broken}, {"failed", r.Failed}} {
		if len(part.ids) > 0 {
			line += fmt.Sprintf("; %s: %s", part.what, strings.Join(part.ids, ", "))
		}
	}
	fmt.Fprintln(w, line)
}

// FaultsExitCode is the pass's exit status: ExitHarness when the harness
// broke, ExitFail when the package hung under a fault, ExitOK otherwise.
func FaultsExitCode(results []FaultResult) int {
	code := ExitOK
	for _, r := range results {
		switch r.Verdict {
		case FaultHarnessError:
			return ExitHarness
		case FaultHung:
			code = ExitFail
		}
	}
	return code
}

// faultsReport is --faults-json's document.
type faultsReport struct {
	Package string        `json:"package"`
	Rules   []FaultResult `json:"rules"`
	Passed  bool          `json:"passed"`
}

// WriteFaultsJSON writes the robustness pass as JSON.
func WriteFaultsJSON(w io.Writer, pkg string, results []FaultResult) error {
	if results == nil {
		results = []FaultResult{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(faultsReport{Package: pkg, Rules: results, Passed: FaultsExitCode(results) == ExitOK})
}

// runFaultPass is --faults in Main: the pass after the run, with the run's
// exit status code folded in.
func (c Command) runFaultPass(ctx context.Context, f flags, cfg Config, pkg string, code int, progress, stdout, stderr io.Writer) int {
	fmt.Fprintf(progress, "robustness pass: %d fault rules between the host and the package\n", len(FaultRules))
	results, err := RunFaults(ctx, cfg, FaultRules, progress)
	fcode := FaultsExitCode(results)
	if err != nil {
		fmt.Fprintf(stderr, "certify: --faults: %v\n", err)
		fcode = ExitHarness
	}
	if f.faultsJSON != "" {
		render := func(w io.Writer) error { return WriteFaultsJSON(w, pkg, results) }
		var werr error
		if f.faultsJSON == "-" {
			werr = render(stdout)
		} else {
			werr = writeFile(f.faultsJSON, render)
		}
		if werr != nil {
			fmt.Fprintf(stderr, "certify: --faults-json: %v\n", werr)
			fcode = ExitHarness
		}
	}
	return max(code, fcode)
}
