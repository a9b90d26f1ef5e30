package certify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/certify"
	"github.com/open-conduit/open-conduit/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./certify -update to create %s", path)
	assert.Equal(t, string(want), string(got), "run go test ./certify -update after a deliberate change")
}

// sampleReport is a fixed report with one result of each kind.
func sampleReport() certify.Report {
	at := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	results := []certify.Result{
		{ID: "kv/scoping", Title: "KV scoping", Section: "Authority and scoping", Status: certify.StatusPass, Duration: 12 * time.Millisecond},
		{ID: "lifecycle/stdout-hygiene", Title: "Stdout hygiene", Section: "Wire format", Status: certify.StatusFail, Duration: 31 * time.Millisecond,
			Detail: "stray stdout: \"debug: starting <now> & then\"",
			Evidence: &certify.Evidence{
				Wire: []certify.WireMessage{
					{Time: at, Direction: certify.DirectionToExtension, Message: json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`)},
					{Time: at.Add(time.Millisecond), Direction: certify.DirectionFromExtension, Text: "debug: starting <now> & then"},
				},
				Stderr: "warning: \x01 control\n",
			}},
		{ID: "routes/display", Title: "Route display within limits", Section: "Work display and wait descriptions", Status: certify.StatusFail, Duration: 5 * time.Millisecond,
			Detail: "link 1 of route full: scheme ftp is not http or https", Baseline: certify.BaselineKnownFailure},
		{ID: "routes/samples", Title: "Route samples writable", Section: "Route traces", Status: certify.StatusPass, Duration: 3 * time.Millisecond,
			Baseline: certify.BaselineStale},
		{ID: "executor/controls", Title: "Declared executor controls", Section: "Public executor controls", Status: certify.StatusSkip,
			Detail: "the manifest declares no executor"},
		{ID: "transactions/deadline", Title: "In-transaction methods within 250 ms", Section: "Transactions and in-transaction calls",
			Status: certify.StatusHarnessError, Duration: time.Millisecond, Detail: "the in-transaction deadline suite is not wired into certify yet"},
	}
	r := certify.Report{
		CriteriaVersion: certify.CriteriaVersion,
		Package:         certify.PackageInfo{Dir: "extensions/full", Name: "full", Version: "1.2.3", Protocol: []protocol.Version{1}},
		HostProtocol:    []protocol.Version{1},
		ProtocolVersion: 1,
		Started:         at,
		Duration:        1234 * time.Millisecond,
		Results:         results,
		Summary:         certify.Summarize(results),
		Uncovered: []certify.Uncovered{{Surface: "ingress reconcile full", Method: "ingress.reconcile",
			Reason: "no criterion of criteria version 2 called it in this run"}},
	}
	r.Summary.Uncovered = len(r.Uncovered)
	return r
}

func TestReportGoldens(t *testing.T) {
	r := sampleReport()
	require.NoError(t, r.Check())
	var progress, summary, j, x bytes.Buffer
	for _, res := range r.Results {
		certify.WriteProgress(&progress, res)
	}
	certify.WriteSummary(&summary, r)
	require.NoError(t, certify.WriteJSON(&j, r))
	require.NoError(t, certify.WriteJUnit(&x, r))
	golden(t, "report.txt", append(progress.Bytes(), summary.Bytes()...))
	golden(t, "report.json", j.Bytes())
	golden(t, "report.xml", x.Bytes())

	cs := make([]certify.Criterion, len(r.Results))
	for i, res := range r.Results {
		cs[i] = criterion(res.ID, passes)
	}
	assert.NoError(t, checkHonest(cs, nil, nil, []string{"routes/display", "routes/samples"}, nil,
		outputs{report: r, progress: progress.String(), json: j.Bytes(), junit: x.Bytes(), exit: r.ExitCode()}))
}

func TestJUnitShape(t *testing.T) {
	r := sampleReport()
	out := render(t, r, "")
	assert.True(t, bytes.HasPrefix(out.junit, []byte(`<?xml version="1.0" encoding="UTF-8"?>`)))
	var x parsedJUnit
	require.NoError(t, xmlUnmarshal(out.junit, &x))
	require.Len(t, x.Suites, 1)
	s := x.Suites[0]
	assert.Equal(t, "certify full", s.Name)
	assert.Equal(t, []int{7, 2, 1, 3}, []int{s.Tests, s.Failures, s.Errors, s.Skipped}, "six criteria and one uncovered surface")
	assert.Equal(t, "1.234", s.Time)
	assert.Equal(t, "2026-11-30T05:00:00Z", s.Timestamp)
	props := map[string]string{}
	for _, p := range s.Properties {
		props[p.Name] = p.Value
	}
	assert.Equal(t, map[string]string{"criteria_version": "2", "package": "full", "package_version": "1.2.3", "protocol_version": "1"}, props)

	byName := map[string]int{}
	for i, c := range s.Cases {
		byName[c.Name] = i
	}
	hygiene := s.Cases[byName["lifecycle/stdout-hygiene"]]
	assert.Equal(t, "certify.lifecycle", hygiene.Classname)
	assert.Equal(t, "0.031", hygiene.Time)
	require.NotNil(t, hygiene.Failure)
	assert.Equal(t, "fail", hygiene.Failure.Type)
	assert.Equal(t, `stray stdout: "debug: starting <now> & then"`, hygiene.Failure.Message, "escaped and read back intact")
	assert.Contains(t, hygiene.Failure.Text, `<- (not JSON) "debug: starting <now> & then"`)
	assert.Equal(t, "warning: \uFFFD control\n", hygiene.SystemErr, "a control character cannot break the XML")

	known := s.Cases[byName["routes/display"]]
	require.NotNil(t, known.Skipped)
	assert.Equal(t, "known_failure", known.Skipped.Type)
	stale := s.Cases[byName["routes/samples"]]
	require.NotNil(t, stale.Failure)
	assert.Equal(t, "stale_baseline", stale.Failure.Type)
	skip := s.Cases[byName["executor/controls"]]
	require.NotNil(t, skip.Skipped)
	assert.Equal(t, "the manifest declares no executor", skip.Skipped.Message)
	harness := s.Cases[byName["transactions/deadline"]]
	require.NotNil(t, harness.Error)
	assert.Equal(t, "harness_error", harness.Error.Type)
	uncovered := s.Cases[byName["uncovered: ingress reconcile full"]]
	assert.Equal(t, "certify.uncovered", uncovered.Classname)
	require.NotNil(t, uncovered.Skipped)
	assert.Equal(t, "uncovered", uncovered.Skipped.Type)
	pass := s.Cases[byName["kv/scoping"]]
	assert.Nil(t, pass.Failure)
	assert.Nil(t, pass.Error)
	assert.Nil(t, pass.Skipped)
}

func TestJSONShape(t *testing.T) {
	out := render(t, sampleReport(), "")
	var j parsedJSON
	require.NoError(t, json.Unmarshal(out.json, &j))
	assert.Equal(t, 2, j.CriteriaVersion)
	assert.Equal(t, "full", j.Package.Name)
	assert.Equal(t, "1.2.3", j.Package.Version)
	assert.Equal(t, []int{1}, j.Package.Protocol)
	assert.Equal(t, 1, j.ProtocolVersion)
	assert.False(t, j.OK)
	assert.Equal(t, certify.ExitFail, j.ExitCode)
	require.Len(t, j.Criteria, 6)
	h := j.Criteria[1]
	assert.Equal(t, "lifecycle/stdout-hygiene", h.ID)
	assert.Equal(t, "fail", h.Status)
	assert.Equal(t, int64(31), *h.DurationMS)
	require.NotNil(t, h.Evidence)
	assert.Len(t, h.Evidence.Wire, 2)
	assert.Equal(t, "known_failure", j.Criteria[2].Baseline)
	assert.Equal(t, "stale", j.Criteria[3].Baseline)
	assert.Equal(t, map[string]int{"pass": 2, "fail": 2, "skip": 1, "harness_error": 1, "not_run": 0, "known_failure": 1, "stale": 1, "uncovered": 1}, j.Summary)
}

func TestReportCheck(t *testing.T) {
	require.NoError(t, sampleReport().Check())
	breaks := map[string]func(*certify.Report){
		"summary miscounts a skip as a pass": func(r *certify.Report) { r.Summary.Skip--; r.Summary.Pass++ },
		"a failure is hidden from the summary": func(r *certify.Report) {
			r.Summary.Fail--
		},
		"unknown status":         func(r *certify.Report) { r.Results[0].Status = "passed" },
		"skip without a reason":  func(r *certify.Report) { r.Results[4].Detail = "" },
		"failure without detail": func(r *certify.Report) { r.Results[1].Detail = " " },
		"reported twice":         func(r *certify.Report) { r.Results[1].ID = r.Results[0].ID },
		"known failure that passed": func(r *certify.Report) {
			r.Results[0].Baseline = certify.BaselineKnownFailure
			r.Summary = certify.Summarize(r.Results)
			r.Summary.Uncovered = len(r.Uncovered)
		},
		"stale failure": func(r *certify.Report) {
			r.Results[1].Baseline = certify.BaselineStale
			r.Summary = certify.Summarize(r.Results)
			r.Summary.Uncovered = len(r.Uncovered)
		},
		"a skip that ran":                  func(r *certify.Report) { r.Results[4].Duration = time.Second },
		"an uncovered surface not counted": func(r *certify.Report) { r.Summary.Uncovered = 0 },
		"an uncovered surface unexplained": func(r *certify.Report) { r.Uncovered[0].Reason = "" },
	}
	for name, brk := range breaks {
		r := sampleReport()
		brk(&r)
		assert.Error(t, r.Check(), name)
	}
}

// Negative controls: a runner that lies must be caught by checkHonest.
func TestBrokenRunnerIsCaught(t *testing.T) {
	p := &fakePackage{}
	cs := []certify.Criterion{
		criterion("a/pass", passes),
		criterion("b/fail", fails),
		notApplicable(criterion("c/skip", nil)),
	}
	expect := map[string]certify.Status{"a/pass": certify.StatusPass, "b/fail": certify.StatusFail, "c/skip": certify.StatusSkip}
	sabotages := map[string]func(*certify.Result){
		"turns skips into passes": func(r *certify.Result) {
			if r.Status == certify.StatusSkip {
				r.Status, r.Detail = certify.StatusPass, ""
			}
		},
		"hides a failure": func(r *certify.Result) {
			if r.Status == certify.StatusFail {
				r.Status, r.Detail, r.Evidence = certify.StatusPass, "", nil
			}
		},
		"blames the package for its own breakage": func(r *certify.Result) {
			if r.Status == certify.StatusPass {
				r.Status, r.Detail = certify.StatusHarnessError, "oops"
			}
		},
	}
	for name, sabotage := range sabotages {
		t.Run(name, func(t *testing.T) {
			restore := certify.BreakRunner(sabotage)
			defer restore()
			var progress bytes.Buffer
			r, err := certify.Run(context.Background(), certify.Config{Dir: minimalDir, Criteria: cs, Launch: p.launch,
				Progress: &progress, Timeout: longTimeout, Grace: testGrace})
			require.NoError(t, err, "the lie is self-consistent, so only checkHonest can catch it")
			m := loadManifest(t, minimalDir)
			err = checkHonest(cs, m, nil, nil, expect, render(t, r, progress.String()))
			assert.Error(t, err)
			t.Log(err)
		})
	}

	// A runner that writes a status no reader knows is caught by Run
	// itself.
	restore := certify.BreakRunner(func(r *certify.Result) { r.Status = "passed" })
	defer restore()
	_, err := certify.Run(context.Background(), certify.Config{Dir: minimalDir, Criteria: cs})
	assert.ErrorContains(t, err, "the report is inconsistent")
}

// Negative controls: reporters that lie must be caught by checkHonest.
func TestBrokenReporterIsCaught(t *testing.T) {
	cs := []certify.Criterion{
		criterion("a/pass", passes),
		criterion("b/fail", fails),
		notApplicable(criterion("c/skip", nil)),
	}
	var progress bytes.Buffer
	r, err := certify.Run(context.Background(), certify.Config{Dir: minimalDir, Criteria: cs, Progress: &progress})
	require.NoError(t, err)
	m := loadManifest(t, minimalDir)
	good := render(t, r, progress.String())
	require.NoError(t, checkHonest(cs, m, nil, nil, nil, good))

	lies := map[string]func(o *outputs){
		"progress reads a skip as a pass": func(o *outputs) {
			o.progress = strings.Replace(o.progress, "SKIP c/skip", "PASS c/skip", 1)
		},
		"progress drops a failure": func(o *outputs) {
			o.progress = regexp.MustCompile(`(?m)^FAIL b/fail.*\n(    .*\n)*`).ReplaceAllString(o.progress, "")
		},
		"JUnit drops its skipped element": func(o *outputs) {
			o.junit = regexp.MustCompile(`<skipped [^>]*>(</skipped>)?`).ReplaceAll(o.junit, nil)
		},
		"JUnit drops its failure element": func(o *outputs) {
			o.junit = regexp.MustCompile(`(?s)<failure .*?</failure>`).ReplaceAll(o.junit, nil)
		},
		"JSON summary miscounts": func(o *outputs) {
			o.json = bytes.Replace(o.json, []byte(`"skip": 1`), []byte(`"skip": 0`), 1)
		},
		"JSON reads a skip as a pass": func(o *outputs) {
			o.json = bytes.Replace(o.json, []byte(`"status": "skip"`), []byte(`"status": "pass"`), 1)
		},
		"report summary hides the failure": func(o *outputs) {
			bad := o.report
			bad.Summary.Fail = 0
			*o = render(t, bad, o.progress)
		},
	}
	for name, lie := range lies {
		o := render(t, r, progress.String())
		lie(&o)
		err := checkHonest(cs, m, nil, nil, nil, o)
		assert.Error(t, err, name)
		t.Log(name, ": ", err)
	}
}
