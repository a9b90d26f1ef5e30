package certify

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/open-conduit/open-conduit/protocol"
)

// Report is the outcome of a run.
type Report struct {
	// CriteriaVersion is the version of the criteria the run held the
	// package to.
	CriteriaVersion int
	// Package is what the manifest says of the package.
	Package PackageInfo
	// HostProtocol lists the protocol versions this build speaks.
	HostProtocol []protocol.Version
	// ProtocolVersion is the version negotiated with the package; 0 when
	// it never completed initialize.
	ProtocolVersion protocol.Version
	// Select is the --run pattern, "" when every criterion ran.
	Select string
	// Started is when the run started, Duration how long it took.
	Started  time.Time
	Duration time.Duration
	// Results holds one result per selected criterion, in run order.
	Results []Result
	// Summary counts the results, and the uncovered surfaces.
	Summary Summary
	// Uncovered lists each surface the manifest declares that no criterion
	// of the run exercised.
	Uncovered []Uncovered
	// StateDir is the kept temporary state directory ("" when removed).
	StateDir string
	// Trace is the wire transcript the package recorded (--trace).
	Trace []WireMessage
}

// PackageInfo names the package under certification.
type PackageInfo struct {
	Dir      string             `json:"dir"`
	Name     string             `json:"name,omitempty"`
	Version  string             `json:"version,omitempty"`
	Protocol []protocol.Version `json:"protocol,omitempty"`
}

// Result is how one criterion ended.
type Result struct {
	ID      string
	Title   string
	Section string
	Status  Status
	// Duration is how long the criterion ran (0 for a skip).
	Duration time.Duration
	// Detail is the failure, the skip's reason or the harness error.
	Detail string
	// Evidence is what the package left behind for a failure or a
	// harness error; nil when there is none.
	Evidence *Evidence
	// Baseline relates the result to the baseline ("" when unlisted).
	Baseline BaselineStatus
}

// FailsRun reports whether the result makes the run fail: a failure the
// baseline does not list, a stale baseline entry or a harness error.
func (r Result) FailsRun() bool {
	switch {
	case r.Status == StatusFail:
		return r.Baseline != BaselineKnownFailure
	case r.Status == StatusHarnessError:
		return true
	default:
		return r.Baseline == BaselineStale
	}
}

// Summary counts results by status. Known failures are counted in Fail too.
type Summary struct {
	Pass         int `json:"pass"`
	Fail         int `json:"fail"`
	Skip         int `json:"skip"`
	HarnessError int `json:"harness_error"`
	NotRun       int `json:"not_run"`
	KnownFailure int `json:"known_failure"`
	Stale        int `json:"stale"`
	// Uncovered counts the declared surfaces no criterion exercised
	// (Report.Uncovered); Summarize leaves it to the run.
	Uncovered int `json:"uncovered"`
}

// Summarize counts results.
func Summarize(results []Result) Summary {
	var s Summary
	for _, r := range results {
		switch r.Status {
		case StatusPass:
			s.Pass++
		case StatusFail:
			s.Fail++
		case StatusSkip:
			s.Skip++
		case StatusHarnessError:
			s.HarnessError++
		case StatusNotRun:
			s.NotRun++
		}
		switch r.Baseline {
		case BaselineKnownFailure:
			s.KnownFailure++
		case BaselineStale:
			s.Stale++
		}
	}
	return s
}

// Total is the number of results counted.
func (s Summary) Total() int { return s.Pass + s.Fail + s.Skip + s.HarnessError + s.NotRun }

// OK reports whether every criterion that applies passed, after the
// baseline.
func (s Summary) OK() bool { return s.Fail == s.KnownFailure && s.Stale == 0 && s.HarnessError == 0 }

// OK reports whether the run passed (Summary.OK).
func (r Report) OK() bool { return r.Summary.OK() }

// The exit statuses of Main.
const (
	ExitOK      = 0 // every selected criterion that applies passed
	ExitFail    = 1 // a criterion failed, or a baseline entry is stale
	ExitUsage   = 2 // bad flags, directory, pattern or baseline
	ExitHarness = 3 // nothing failed, but the harness broke
)

// ExitCode is the exit status the report calls for.
func (r Report) ExitCode() int {
	s := r.Summary
	switch {
	case s.Fail > s.KnownFailure || s.Stale > 0:
		return ExitFail
	case s.HarnessError > 0:
		return ExitHarness
	}
	return ExitOK
}

// Check verifies that the report says one consistent thing: each result
// has a known status, a unique ID and the detail its status needs, its
// baseline status fits its status, and the summary counts the results.
// Run refuses to hand back a report that fails it.
func (r Report) Check() error {
	var errs []error
	seen := map[string]bool{}
	for i, res := range r.Results {
		at := fmt.Sprintf("result %d (%s)", i, res.ID)
		switch {
		case res.ID == "":
			errs = append(errs, fmt.Errorf("%s: no ID", at))
		case seen[res.ID]:
			errs = append(errs, fmt.Errorf("%s: reported twice", at))
		}
		seen[res.ID] = true
		if !res.Status.Valid() {
			errs = append(errs, fmt.Errorf("%s: unknown status %q", at, res.Status))
		}
		if res.Status != StatusPass && strings.TrimSpace(res.Detail) == "" {
			errs = append(errs, fmt.Errorf("%s: %s without a detail", at, res.Status))
		}
		if res.Status == StatusSkip && res.Duration != 0 {
			errs = append(errs, fmt.Errorf("%s: a skip that ran for %v", at, res.Duration))
		}
		want := map[BaselineStatus][]Status{
			"":                   Statuses(),
			BaselineKnownFailure: {StatusFail},
			BaselineStale:        {StatusPass, StatusSkip},
			BaselineListed:       {StatusHarnessError, StatusNotRun},
		}[res.Baseline]
		if !containsStatus(want, res.Status) {
			errs = append(errs, fmt.Errorf("%s: baseline status %q with status %s", at, res.Baseline, res.Status))
		}
	}
	got := Summarize(r.Results)
	got.Uncovered = r.Summary.Uncovered
	if got != r.Summary {
		errs = append(errs, fmt.Errorf("the summary %+v does not count the results %+v", r.Summary, got))
	}
	if r.Summary.Uncovered != len(r.Uncovered) {
		errs = append(errs, fmt.Errorf("the summary counts %d uncovered surface(s), the report lists %d", r.Summary.Uncovered, len(r.Uncovered)))
	}
	for i, u := range r.Uncovered {
		if u.Surface == "" || u.Method == "" || u.Reason == "" {
			errs = append(errs, fmt.Errorf("uncovered surface %d (%s) lacks its surface, method or reason", i, u.Surface))
		}
	}
	return errors.Join(errs...)
}

func containsStatus(ss []Status, s Status) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// WriteProgress writes the progress line of one result, such as
// "PASS lifecycle/handshake (12ms)" or
// "SKIP executor/controls: the manifest declares no executor", followed,
// for a failure or a harness error, by its detail and evidence indented.
func WriteProgress(w io.Writer, r Result) {
	var b strings.Builder
	b.WriteString(r.Status.Word())
	b.WriteByte(' ')
	b.WriteString(printable(r.ID))
	if r.Status != StatusSkip && r.Status != StatusNotRun {
		fmt.Fprintf(&b, " (%s)", formatDuration(r.Duration))
	}
	switch r.Baseline {
	case BaselineKnownFailure:
		b.WriteString(" [known failure: listed in the baseline]")
	case BaselineStale:
		b.WriteString(" [stale: listed in the baseline as failing]")
	case BaselineListed:
		b.WriteString(" [listed in the baseline]")
	}
	switch r.Status {
	case StatusSkip, StatusNotRun:
		b.WriteString(": ")
		b.WriteString(printable(firstLine(r.Detail)))
		b.WriteByte('\n')
	case StatusFail, StatusHarnessError:
		b.WriteByte('\n')
		indent(&b, "    ", r.Detail)
		if ev := r.Evidence; ev != nil {
			if len(ev.Wire) > 0 {
				fmt.Fprintf(&b, "    %s:\n", evidenceHeading(ev))
				for i, m := range ev.Wire {
					indent(&b, "      ", evidenceLine(ev, i, m))
				}
			}
			if ev.Stderr != "" {
				b.WriteString("    stderr tail:\n")
				indent(&b, "      ", ev.Stderr)
			}
		}
	default:
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}

// evidenceHeading introduces the wire of a failure's evidence.
func evidenceHeading(ev *Evidence) string {
	if ev.At > 0 {
		return fmt.Sprintf("wire messages %d to %d of the transcript, around message %d (marked *)", ev.From, ev.From+len(ev.Wire)-1, ev.At)
	}
	return fmt.Sprintf("last %d wire message(s)", len(ev.Wire))
}

// evidenceLine shows the i-th message of the evidence, marking the one
// the failure names.
func evidenceLine(ev *Evidence, i int, m WireMessage) string {
	if ev.At > 0 && ev.From+i == ev.At {
		return "* " + wireLine(m)
	}
	return wireLine(m)
}

// wireLine shows one wire message in a progress report.
func wireLine(m WireMessage) string {
	arrow := "->"
	if m.Direction == DirectionFromExtension {
		arrow = "<-"
	}
	body := string(m.Message)
	if m.Message == nil {
		body = fmt.Sprintf("(not JSON) %q", m.Text)
	}
	return arrow + " " + clipBytes(body, 500)
}

func indent(b *strings.Builder, prefix, text string) {
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		b.WriteString(prefix)
		b.WriteString(printable(line))
		b.WriteByte('\n')
	}
}

// printable escapes control characters and invalid UTF-8 in text from the
// package (stderr, stray stdout), so it cannot drive the terminal.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\t') {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				fmt.Fprintf(&b, "\\x%02x", s[i])
				continue
			}
			b.WriteRune(r)
		case unicode.IsControl(r) && r != '\t':
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// plural is n with the noun for n.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func formatDuration(d time.Duration) string {
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// WriteSummary writes the summary that ends a run's progress output: the
// counts of every status, the baseline's, and the verdict.
func WriteSummary(w io.Writer, r Report) {
	s := r.Summary
	name := r.Package.Name
	if name == "" {
		name = r.Package.Dir
	}
	if r.Package.Version != "" {
		name += " " + r.Package.Version
	}
	fmt.Fprintf(w, "\ncertify %s, criteria version %d", printable(name), r.CriteriaVersion)
	if r.ProtocolVersion != 0 {
		fmt.Fprintf(w, ", protocol version %d", r.ProtocolVersion)
	}
	if r.Select != "" {
		fmt.Fprintf(w, ", --run %q", r.Select)
	}
	fmt.Fprintf(w, "\n%s: %d pass, %d fail, %d skip, %d harness_error", plural(s.Total(), "criterion", "criteria"), s.Pass, s.Fail, s.Skip, s.HarnessError)
	if s.NotRun > 0 {
		fmt.Fprintf(w, ", %d not run", s.NotRun)
	}
	if s.KnownFailure > 0 || s.Stale > 0 {
		fmt.Fprintf(w, " (baseline: %d known failure, %d stale)", s.KnownFailure, s.Stale)
	}
	fmt.Fprintf(w, " in %s\n", formatDuration(r.Duration))
	if len(r.Uncovered) > 0 {
		fmt.Fprintf(w, "%s uncovered: declared, but no criterion exercised them\n", plural(len(r.Uncovered), "surface", "surfaces"))
		for _, u := range r.Uncovered {
			fmt.Fprintf(w, "  UNCOVERED %s (%s): %s\n", printable(u.Surface), u.Method, u.Reason)
		}
	}
	if r.StateDir != "" {
		fmt.Fprintf(w, "state directory kept: %s\n", r.StateDir)
	}
	switch r.ExitCode() {
	case ExitOK:
		fmt.Fprintln(w, "ok")
	case ExitHarness:
		fmt.Fprintln(w, "HARNESS ERROR: the runner could not check every criterion; nothing is blamed on the package")
	default:
		fmt.Fprintln(w, "FAIL")
	}
}

// jsonReport is the JSON form of a report.
type jsonReport struct {
	CriteriaVersion int                `json:"criteria_version"`
	Package         PackageInfo        `json:"package"`
	ProtocolVersion protocol.Version   `json:"protocol_version,omitempty"`
	HostProtocol    []protocol.Version `json:"host_protocol_versions"`
	Select          string             `json:"run,omitempty"`
	OK              bool               `json:"ok"`
	ExitCode        int                `json:"exit_code"`
	Started         time.Time          `json:"started"`
	DurationMS      int64              `json:"duration_ms"`
	Summary         Summary            `json:"summary"`
	Criteria        []jsonResult       `json:"criteria"`
	Uncovered       []Uncovered        `json:"uncovered"`
	StateDir        string             `json:"state_dir,omitempty"`
}

type jsonResult struct {
	ID         string         `json:"id"`
	Title      string         `json:"title"`
	Section    string         `json:"section"`
	Status     Status         `json:"status"`
	DurationMS int64          `json:"duration_ms"`
	Detail     string         `json:"detail,omitempty"`
	Evidence   *Evidence      `json:"evidence,omitempty"`
	Baseline   BaselineStatus `json:"baseline,omitempty"`
}

// WriteJSON writes the report as one indented JSON document (--json).
func WriteJSON(w io.Writer, r Report) error {
	out := jsonReport{
		CriteriaVersion: r.CriteriaVersion,
		Package:         r.Package,
		ProtocolVersion: r.ProtocolVersion,
		HostProtocol:    r.HostProtocol,
		Select:          r.Select,
		OK:              r.OK(),
		ExitCode:        r.ExitCode(),
		Started:         r.Started.UTC(),
		DurationMS:      r.Duration.Milliseconds(),
		Summary:         r.Summary,
		Criteria:        make([]jsonResult, 0, len(r.Results)),
		Uncovered:       append([]Uncovered{}, r.Uncovered...),
		StateDir:        r.StateDir,
	}
	for _, res := range r.Results {
		out.Criteria = append(out.Criteria, jsonResult{
			ID: res.ID, Title: res.Title, Section: res.Section, Status: res.Status,
			DurationMS: res.Duration.Milliseconds(), Detail: res.Detail, Evidence: res.Evidence,
			Baseline: res.Baseline,
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// The JUnit XML form. A known failure is reported as skipped (as other
// runners report an expected failure), a stale baseline entry as a failure
// of type "stale_baseline", and a harness error as an error: so the JUnit
// failures and errors are exactly what fails the run.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
	SystemErr string        `xml:"system-err,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr,omitempty"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML (--junit): one testsuite for
// the package, one testcase per selected criterion, named by its ID and
// classed by its first path element.
func WriteJUnit(w io.Writer, r Report) error {
	name := "certify " + r.Package.Name
	if r.Package.Name == "" {
		name = "certify " + r.Package.Dir
	}
	suite := junitSuite{
		Name:      name,
		Time:      seconds(r.Duration),
		Timestamp: r.Started.UTC().Format(time.RFC3339),
		Properties: []junitProperty{
			{"criteria_version", fmt.Sprint(r.CriteriaVersion)},
			{"package", r.Package.Name},
			{"package_version", r.Package.Version},
			{"protocol_version", fmt.Sprint(int(r.ProtocolVersion))},
		},
	}
	if r.Select != "" {
		suite.Properties = append(suite.Properties, junitProperty{"run", r.Select})
	}
	for _, res := range r.Results {
		c := junitCase{Name: res.ID, Classname: "certify." + strings.SplitN(res.ID, "/", 2)[0], Time: seconds(res.Duration)}
		body := res.Detail
		if ev := res.Evidence; ev != nil {
			if len(ev.Wire) > 0 {
				body += "\n\n" + evidenceHeading(ev) + ":"
				for i, m := range ev.Wire {
					body += "\n" + evidenceLine(ev, i, m)
				}
			}
			c.SystemErr = ev.Stderr
		}
		switch {
		case res.Status == StatusFail && res.Baseline == BaselineKnownFailure:
			c.Skipped = &junitProblem{Type: string(BaselineKnownFailure), Message: "known failure listed in the baseline: " + firstLine(res.Detail), Text: body}
			suite.Skipped++
		case res.Status == StatusFail:
			c.Failure = &junitProblem{Type: string(StatusFail), Message: firstLine(res.Detail), Text: body}
			suite.Failures++
		case res.Status == StatusHarnessError:
			c.Error = &junitProblem{Type: string(StatusHarnessError), Message: firstLine(res.Detail), Text: body}
			suite.Errors++
		case res.Baseline == BaselineStale:
			c.Failure = &junitProblem{Type: "stale_baseline", Message: fmt.Sprintf("listed in the baseline as failing, but it is %s now: remove it from the baseline", res.Status)}
			suite.Failures++
		case res.Status == StatusSkip, res.Status == StatusNotRun:
			c.Skipped = &junitProblem{Type: string(res.Status), Message: firstLine(res.Detail)}
			suite.Skipped++
		}
		suite.Cases = append(suite.Cases, c)
	}
	// A declared surface no criterion exercised reads as skipped, so a CI
	// dashboard shows what the certification did not look at.
	for _, u := range r.Uncovered {
		suite.Cases = append(suite.Cases, junitCase{Name: "uncovered: " + u.Surface, Classname: "certify.uncovered", Time: seconds(0),
			Skipped: &junitProblem{Type: "uncovered", Message: u.Method + ": " + u.Reason}})
		suite.Skipped++
	}
	suite.Tests = len(suite.Cases)
	doc := junitSuites{Name: "open-conduit extension certify", Tests: suite.Tests, Failures: suite.Failures,
		Errors: suite.Errors, Skipped: suite.Skipped, Time: suite.Time, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// WriteTrace writes a wire transcript as JSON lines (--trace): one message
// per line, with its direction and time.
func WriteTrace(w io.Writer, trace []WireMessage) error {
	enc := json.NewEncoder(w)
	for _, m := range normalizeWire(trace) {
		if err := enc.Encode(m); err != nil {
			return err
		}
	}
	return nil
}
