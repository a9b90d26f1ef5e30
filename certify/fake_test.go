package certify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/certify"
	"github.com/open-conduit/open-conduit/protocol"
)

// Deadlines. The only waits in these tests are the runner's own, and only
// the tests of timeouts reach one: the others get a deadline so long that a
// loaded machine cannot turn a quick criterion into a timeout.
const (
	testTimeout = 100 * time.Millisecond
	testGrace   = 20 * time.Millisecond
	longTimeout = time.Minute
)

// fakePackage is a Package with no process: criteria drive it directly.
type fakePackage struct {
	mu        sync.Mutex
	launches  int
	starts    int
	restarts  int
	stops     int
	running   bool
	exitCause error
	startErr  error
	trace     []certify.WireMessage
	stream    io.Writer // LaunchSpec.Trace
	stderr    string
	clock     time.Time
}

var _ certify.Package = (*fakePackage)(nil)

func (p *fakePackage) record(dir string, msg string) {
	p.clock = p.clock.Add(time.Millisecond)
	m := certify.WireMessage{Time: p.clock, Direction: dir}
	if json.Valid([]byte(msg)) {
		m.Message = json.RawMessage(msg)
	} else {
		m.Text = msg
	}
	p.trace = append(p.trace, m)
	if p.stream != nil {
		_ = certify.WriteTrace(p.stream, []certify.WireMessage{m})
	}
}

func (p *fakePackage) Start(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts++
	if p.startErr != nil {
		return p.startErr
	}
	p.running, p.exitCause = true, nil
	p.record(certify.DirectionToExtension, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_versions":[1]}}`)
	p.record(certify.DirectionFromExtension, `{"jsonrpc":"2.0","id":1,"result":{"protocol_version":1}}`)
	return nil
}

func (p *fakePackage) Restart(ctx context.Context) error {
	p.mu.Lock()
	p.restarts++
	p.running = false
	p.mu.Unlock()
	return p.Start(ctx)
}

func (p *fakePackage) Stop(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stops++
	p.running, p.exitCause = false, nil
	return nil
}

func (p *fakePackage) Call(_ context.Context, method string, _, _ any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return errors.New("broken pipe")
	}
	p.record(certify.DirectionToExtension, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":%q}`, method))
	p.record(certify.DirectionFromExtension, `{"jsonrpc":"2.0","id":2,"result":{}}`)
	return nil
}

func (p *fakePackage) Exited() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.running, p.exitCause
}

func (p *fakePackage) ProtocolVersion() protocol.Version {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.starts == 0 {
		return 0
	}
	return protocol.Version1
}

func (p *fakePackage) Trace() []certify.WireMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]certify.WireMessage(nil), p.trace...)
}

func (p *fakePackage) StderrTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr
}

// crash ends the process as if it died on its own, leaving a stray stdout
// line and stderr behind.
func (p *fakePackage) crash(cause string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record(certify.DirectionFromExtension, "panic: nil map")
	p.stderr += "goroutine 1 [running]:\n" + cause + "\n"
	p.running, p.exitCause = false, errors.New(cause)
}

func (p *fakePackage) counts() (launches, starts, restarts, stops int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.launches, p.starts, p.restarts, p.stops
}

func (p *fakePackage) launch(_ context.Context, spec certify.LaunchSpec) (certify.Package, error) {
	p.mu.Lock()
	p.launches++
	p.stream = spec.Trace
	p.mu.Unlock()
	return p, nil
}

// Fake criteria, each ending in a known way.

func criterion(id string, run func(context.Context, *certify.Target) error) certify.Criterion {
	return certify.Criterion{ID: id, Title: "fake " + id, Checks: "that " + id + " ends as its name says", Section: "Fakes", Run: run}
}

func passes(context.Context, *certify.Target) error { return nil }

func fails(context.Context, *certify.Target) error {
	return errors.New("the package broke the rule\nsecond line")
}

func notApplicable(c certify.Criterion) certify.Criterion {
	c.Applies = func(*protocol.Manifest) (bool, string) { return false, "the manifest declares no widget" }
	c.Run = func(context.Context, *certify.Target) error { panic("a skipped criterion ran") }
	return c
}

func harnessBreaks(context.Context, *certify.Target) error {
	return certify.Harnessf("could not make a fixture")
}

func panics(context.Context, *certify.Target) error { panic("boom") }

func usesPackage(ctx context.Context, t *certify.Target) error {
	p, err := t.Package(ctx)
	if err != nil {
		return err
	}
	return p.Call(ctx, "route.match", nil, nil)
}

// blocksUntilDeadline honours its context: it times out cleanly.
func blocksUntilDeadline(ctx context.Context, t *certify.Target) error {
	if _, err := t.Package(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

// ignoresContext blocks until the test ends, whatever its context says.
func ignoresContext(release <-chan struct{}) func(context.Context, *certify.Target) error {
	return func(context.Context, *certify.Target) error {
		<-release
		return nil
	}
}

// crashes kills the package mid-criterion and then reports success.
func crashes(p *fakePackage) func(context.Context, *certify.Target) error {
	return func(ctx context.Context, t *certify.Target) error {
		if _, err := t.Package(ctx); err != nil {
			return err
		}
		p.crash("signal: segmentation fault")
		return nil
	}
}

// outputs is what a run printed and wrote.
type outputs struct {
	report   certify.Report
	progress string
	json     []byte
	junit    []byte
	exit     int // the exit status the run ended with
}

func render(t *testing.T, r certify.Report, progress string) outputs {
	t.Helper()
	var j, x bytes.Buffer
	require.NoError(t, certify.WriteJSON(&j, r))
	require.NoError(t, certify.WriteJUnit(&x, r))
	return outputs{report: r, progress: progress, json: j.Bytes(), junit: x.Bytes(), exit: r.ExitCode()}
}

// The shapes the honesty check parses the outputs back into.

type parsedJSON struct {
	CriteriaVersion int    `json:"criteria_version"`
	OK              bool   `json:"ok"`
	ExitCode        int    `json:"exit_code"`
	Run             string `json:"run"`
	Package         struct {
		Name     string `json:"name"`
		Version  string `json:"version"`
		Protocol []int  `json:"protocol"`
	} `json:"package"`
	ProtocolVersion int            `json:"protocol_version"`
	Summary         map[string]int `json:"summary"`
	Criteria        []struct {
		ID         string `json:"id"`
		Status     string `json:"status"`
		DurationMS *int64 `json:"duration_ms"`
		Detail     string `json:"detail"`
		Baseline   string `json:"baseline"`
		Evidence   *struct {
			Wire   []json.RawMessage `json:"wire"`
			Stderr string            `json:"stderr"`
		} `json:"evidence"`
	} `json:"criteria"`
	Uncovered []struct {
		Surface string `json:"surface"`
		Method  string `json:"method"`
		Reason  string `json:"reason"`
	} `json:"uncovered"`
}

type parsedJUnit struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []struct {
		Name       string `xml:"name,attr"`
		Tests      int    `xml:"tests,attr"`
		Failures   int    `xml:"failures,attr"`
		Errors     int    `xml:"errors,attr"`
		Skipped    int    `xml:"skipped,attr"`
		Time       string `xml:"time,attr"`
		Timestamp  string `xml:"timestamp,attr"`
		Properties []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name      string         `xml:"name,attr"`
			Classname string         `xml:"classname,attr"`
			Time      string         `xml:"time,attr"`
			Failure   *parsedProblem `xml:"failure"`
			Error     *parsedProblem `xml:"error"`
			Skipped   *parsedProblem `xml:"skipped"`
			SystemErr string         `xml:"system-err"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

type parsedProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

var progressLine = regexp.MustCompile(`^(PASS|FAIL|SKIP|ERROR|NOT RUN) ([^\s:]+)`)

// checkHonest checks what a run told people and CI against what the
// criteria are: every selected criterion is reported exactly once, the
// same way in the progress lines, the JSON and the JUnit XML; one that does
// not apply to the manifest is a skip, never a pass; each one whose
// expected status is given has it; every count equals the per-criterion
// statuses; and the verdict follows from them. It returns every breach.
func checkHonest(cs []certify.Criterion, m *protocol.Manifest, selected *regexp.Regexp, baseline []string, expect map[string]certify.Status, out outputs) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	listed := map[string]bool{}
	for _, id := range baseline {
		listed[id] = true
	}

	// Progress: the lines that start with a status word, in order.
	var progressIDs []string
	progressWord := map[string]string{}
	for _, line := range strings.Split(out.progress, "\n") {
		if g := progressLine.FindStringSubmatch(line); g != nil {
			if _, dup := progressWord[g[2]]; dup {
				fail("progress reports %s twice", g[2])
			}
			progressIDs = append(progressIDs, g[2])
			progressWord[g[2]] = g[1]
		}
	}

	var j parsedJSON
	if err := json.Unmarshal(out.json, &j); err != nil {
		return fmt.Errorf("the JSON report does not parse: %w", err)
	}
	var x parsedJUnit
	if err := xml.Unmarshal(out.junit, &x); err != nil {
		return fmt.Errorf("the JUnit report does not parse: %w", err)
	}
	if len(x.Suites) != 1 {
		return fmt.Errorf("JUnit has %d testsuites, want 1", len(x.Suites))
	}
	suite := x.Suites[0]

	jsonStatus := map[string]string{}
	jsonBaseline := map[string]string{}
	counts := map[string]int{}
	for _, c := range j.Criteria {
		if _, dup := jsonStatus[c.ID]; dup {
			fail("JSON reports %s twice", c.ID)
		}
		jsonStatus[c.ID], jsonBaseline[c.ID] = c.Status, c.Baseline
		counts[c.Status]++
		if c.Baseline == string(certify.BaselineKnownFailure) {
			counts["known_failure"]++
		}
		if c.Baseline == string(certify.BaselineStale) {
			counts["stale"]++
		}
		if c.DurationMS == nil {
			fail("JSON %s has no duration_ms", c.ID)
		}
		if c.Status != "pass" && c.Detail == "" {
			fail("JSON %s is %s without a detail", c.ID, c.Status)
		}
	}
	for _, k := range []string{"pass", "fail", "skip", "harness_error", "not_run", "known_failure", "stale"} {
		if j.Summary[k] != counts[k] {
			fail("JSON summary counts %d %s, the criteria %d", j.Summary[k], k, counts[k])
		}
	}

	junitState := map[string]string{}
	var jf, je, js, uncovered int
	for _, c := range suite.Cases {
		if c.Classname == "certify.uncovered" {
			// A declared surface no criterion exercised: stated as skipped.
			uncovered++
			if c.Skipped == nil || c.Skipped.Type != "uncovered" || c.Failure != nil || c.Error != nil {
				fail("JUnit %s is not skipped as uncovered", c.Name)
			}
			js++
			continue
		}
		n := 0
		state := "pass"
		if c.Failure != nil {
			n, state = n+1, "failure"
			jf++
		}
		if c.Error != nil {
			n, state = n+1, "error"
			je++
		}
		if c.Skipped != nil {
			n, state = n+1, "skipped"
			js++
		}
		if n > 1 {
			fail("JUnit %s has %d outcomes", c.Name, n)
		}
		if _, dup := junitState[c.Name]; dup {
			fail("JUnit reports %s twice", c.Name)
		}
		junitState[c.Name] = state
		if want := "certify." + strings.SplitN(c.Name, "/", 2)[0]; c.Classname != want {
			fail("JUnit %s has classname %q, want %q", c.Name, c.Classname, want)
		}
	}
	if suite.Tests != len(suite.Cases) || suite.Failures != jf || suite.Errors != je || suite.Skipped != js {
		fail("JUnit testsuite counts tests=%d failures=%d errors=%d skipped=%d, its cases %d/%d/%d/%d",
			suite.Tests, suite.Failures, suite.Errors, suite.Skipped, len(suite.Cases), jf, je, js)
	}
	if x.Tests != suite.Tests || x.Failures != suite.Failures || x.Errors != suite.Errors || x.Skipped != suite.Skipped {
		fail("JUnit testsuites counts differ from its testsuite's")
	}

	// Every selected criterion, exactly once, in the same state everywhere.
	var want []string
	for _, c := range cs {
		if selected == nil || selected.MatchString(c.ID) {
			want = append(want, c.ID)
		}
	}
	if strings.Join(progressIDs, " ") != strings.Join(want, " ") {
		fail("progress reports %v, want %v in order", progressIDs, want)
	}
	if len(j.Criteria) != len(want) || len(suite.Cases)-uncovered != len(want) {
		fail("JSON reports %d criteria and JUnit %d, want %d", len(j.Criteria), len(suite.Cases)-uncovered, len(want))
	}
	if j.Summary["uncovered"] != len(j.Uncovered) || uncovered != len(j.Uncovered) {
		fail("uncovered: the JSON summary counts %d, JSON lists %d, JUnit %d", j.Summary["uncovered"], len(j.Uncovered), uncovered)
	}
	for _, u := range j.Uncovered {
		if u.Surface == "" || u.Method == "" || u.Reason == "" {
			fail("JSON uncovered %+v lacks its surface, method or reason", u)
		}
	}
	wordOf := map[string]string{"pass": "PASS", "fail": "FAIL", "skip": "SKIP", "harness_error": "ERROR", "not_run": "NOT RUN"}
	wantExit := 0
	for _, c := range cs {
		if selected != nil && !selected.MatchString(c.ID) {
			if _, ok := jsonStatus[c.ID]; ok {
				fail("%s was not selected but is reported", c.ID)
			}
			continue
		}
		st := jsonStatus[c.ID]
		if progressWord[c.ID] != wordOf[st] {
			fail("%s: progress says %s, JSON %s", c.ID, progressWord[c.ID], st)
		}
		var wantJUnit string
		switch {
		case st == "fail" && jsonBaseline[c.ID] == "known_failure":
			wantJUnit = "skipped"
		case st == "fail":
			wantJUnit = "failure"
		case st == "harness_error":
			wantJUnit = "error"
		case jsonBaseline[c.ID] == "stale":
			wantJUnit = "failure"
		case st == "skip", st == "not_run":
			wantJUnit = "skipped"
		default:
			wantJUnit = "pass"
		}
		if junitState[c.ID] != wantJUnit {
			fail("%s: JUnit says %s, want %s for JSON %s", c.ID, junitState[c.ID], wantJUnit, st)
		}
		if m != nil && c.Applies != nil {
			if ok, _ := c.Applies(m); !ok && st != "skip" && st != "not_run" {
				fail("%s does not apply to the manifest but reads %s", c.ID, st)
			}
		}
		if e, ok := expect[c.ID]; ok && string(e) != st {
			fail("%s reads %s, want %s", c.ID, st, e)
		}
		switch wantB := listed[c.ID]; {
		case !wantB && jsonBaseline[c.ID] != "":
			fail("%s is not in the baseline but reads %s", c.ID, jsonBaseline[c.ID])
		case wantB && st == "fail" && jsonBaseline[c.ID] != "known_failure",
			wantB && (st == "pass" || st == "skip") && jsonBaseline[c.ID] != "stale":
			fail("%s is in the baseline and %s but reads baseline %q", c.ID, st, jsonBaseline[c.ID])
		}
		switch {
		case st == "fail" && !listed[c.ID], st != "fail" && st != "harness_error" && st != "not_run" && listed[c.ID]:
			wantExit = 1
		case st == "harness_error" && wantExit == 0:
			wantExit = 3
		}
	}
	if j.ExitCode != wantExit || out.exit != wantExit || j.OK != (wantExit == 0) {
		fail("exit code %d (JSON %d, ok %v), want %d", out.exit, j.ExitCode, j.OK, wantExit)
	}
	return errors.Join(errs...)
}

func xmlUnmarshal(data []byte, v any) error { return xml.Unmarshal(data, v) }
