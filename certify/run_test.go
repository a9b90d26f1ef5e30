package certify_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/certify"
	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/protocol"
)

const (
	minimalDir = "testdata/packages/minimal"
	fullDir    = "testdata/packages/full"
	invalidDir = "testdata/packages/invalid"
)

func loadManifest(t *testing.T, dir string) *protocol.Manifest {
	t.Helper()
	m, err := protocol.LoadManifest(dir)
	require.NoError(t, err)
	return m
}

// run runs cfg with tiny deadlines and a fake package, checks the outputs'
// honesty against expect, and returns them.
func run(t *testing.T, cfg certify.Config, expect map[string]certify.Status) (outputs, error) {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = minimalDir
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = longTimeout
	}
	if cfg.Grace == 0 {
		cfg.Grace = testGrace
	}
	var progress bytes.Buffer
	cfg.Progress = &progress
	r, err := certify.Run(context.Background(), cfg)
	out := render(t, r, progress.String())
	m, _ := protocol.LoadManifest(cfg.Dir)
	assert.NoError(t, checkHonest(cfg.Criteria, m, cfg.Select, cfg.Baseline, expect, out))
	return out, err
}

func result(t *testing.T, r certify.Report, id string) certify.Result {
	t.Helper()
	for _, res := range r.Results {
		if res.ID == id {
			return res
		}
	}
	t.Fatalf("no result for %s", id)
	return certify.Result{}
}

func TestEveryStatus(t *testing.T) {
	p := &fakePackage{}
	cs := []certify.Criterion{
		criterion("a/pass", passes),
		criterion("b/fail", fails),
		notApplicable(criterion("c/skip", nil)),
		criterion("d/harness", harnessBreaks),
		criterion("e/panic", panics),
		criterion("f/package", usesPackage),
	}
	out, err := run(t, certify.Config{Criteria: cs, Launch: p.launch}, map[string]certify.Status{
		"a/pass": certify.StatusPass, "b/fail": certify.StatusFail, "c/skip": certify.StatusSkip,
		"d/harness": certify.StatusHarnessError, "e/panic": certify.StatusHarnessError, "f/package": certify.StatusPass,
	})
	require.NoError(t, err)
	r := out.report

	assert.Equal(t, certify.Summary{Pass: 2, Fail: 1, Skip: 1, HarnessError: 2}, r.Summary)
	assert.False(t, r.OK())
	assert.Equal(t, certify.ExitFail, r.ExitCode())
	assert.Equal(t, "the manifest declares no widget", result(t, r, "c/skip").Detail)
	assert.Zero(t, result(t, r, "c/skip").Duration)
	assert.Equal(t, "could not make a fixture", result(t, r, "d/harness").Detail)
	assert.Contains(t, result(t, r, "e/panic").Detail, "the criterion panicked: boom")
	assert.Equal(t, "the package broke the rule\nsecond line", result(t, r, "b/fail").Detail)
	assert.Equal(t, protocol.Version1, r.ProtocolVersion)
	assert.Equal(t, "minimal", r.Package.Name)
	assert.Equal(t, "0.1.0", r.Package.Version)
	assert.Equal(t, certify.CriteriaVersion, r.CriteriaVersion)

	// The progress lines, in run order, each as it ends.
	lines := strings.Split(strings.TrimRight(out.progress, "\n"), "\n")
	assert.Regexp(t, `^PASS a/pass \(\d+ms\)$`, lines[0])
	assert.Regexp(t, `^FAIL b/fail \(\d+ms\)$`, lines[1])
	assert.Equal(t, "    the package broke the rule", lines[2])
	assert.Equal(t, "    second line", lines[3])
	assert.Equal(t, "SKIP c/skip: the manifest declares no widget", lines[4])
	assert.Regexp(t, `^ERROR d/harness \(\d+ms\)$`, lines[5])
	assert.Regexp(t, `^PASS f/package \(\d+ms\)$`, lines[len(lines)-1])

	// The package was started once, lazily, and stopped at the end.
	launches, starts, restarts, stops := p.counts()
	assert.Equal(t, []int{1, 1, 0, 1}, []int{launches, starts, restarts, stops})
}

func TestNoPackageStartedWhenNoCriterionNeedsOne(t *testing.T) {
	p := &fakePackage{}
	out, err := run(t, certify.Config{Criteria: []certify.Criterion{criterion("a/pass", passes)}, Launch: p.launch}, nil)
	require.NoError(t, err)
	assert.True(t, out.report.OK())
	assert.Equal(t, certify.ExitOK, out.report.ExitCode())
	launches, _, _, _ := p.counts()
	assert.Zero(t, launches)
	assert.Zero(t, out.report.ProtocolVersion)
}

func TestTimeouts(t *testing.T) {
	p := &fakePackage{}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	cs := []certify.Criterion{
		criterion("a/honours-deadline", blocksUntilDeadline),
		criterion("b/ignores-context", ignoresContext(release)),
		criterion("c/next", usesPackage),
	}
	out, err := run(t, certify.Config{Criteria: cs, Launch: p.launch, Timeout: testTimeout}, map[string]certify.Status{
		"a/honours-deadline": certify.StatusFail, "b/ignores-context": certify.StatusFail, "c/next": certify.StatusPass,
	})
	require.NoError(t, err)
	r := out.report

	a := result(t, r, "a/honours-deadline")
	assert.Equal(t, "criterion a/honours-deadline timed out after 100ms", a.Detail)
	require.NotNil(t, a.Evidence, "a hang keeps the last wire messages")
	assert.NotEmpty(t, a.Evidence.Wire)

	b := result(t, r, "b/ignores-context")
	assert.Equal(t, "criterion b/ignores-context timed out after 100ms and did not return within 20ms more; abandoned", b.Detail)

	// The hung package was restarted before the next criterion used it.
	_, starts, restarts, _ := p.counts()
	assert.Equal(t, 1, restarts)
	assert.Equal(t, 2, starts)
	assert.Contains(t, out.progress, "FAIL a/honours-deadline (")
}

func TestAbandonedCriterionCannotReachThePackage(t *testing.T) {
	p := &fakePackage{}
	got := make(chan error, 1)
	release := make(chan struct{})
	cs := []certify.Criterion{
		criterion("a/late", func(ctx context.Context, tg *certify.Target) error {
			<-release
			_, err := tg.Package(context.Background())
			got <- err
			return nil
		}),
	}
	_, err := run(t, certify.Config{Criteria: cs, Launch: p.launch, Timeout: testTimeout}, map[string]certify.Status{"a/late": certify.StatusFail})
	require.NoError(t, err)
	close(release)
	assert.ErrorIs(t, <-got, certify.ErrHarness)
}

func TestCrashMidCriterion(t *testing.T) {
	p := &fakePackage{}
	cs := []certify.Criterion{
		criterion("a/crash", crashes(p)),
		criterion("b/next", usesPackage),
	}
	out, err := run(t, certify.Config{Criteria: cs, Launch: p.launch}, map[string]certify.Status{
		"a/crash": certify.StatusFail, "b/next": certify.StatusPass,
	})
	require.NoError(t, err)
	a := result(t, out.report, "a/crash")
	assert.Equal(t, "the package exited during the criterion: signal: segmentation fault", a.Detail)
	require.NotNil(t, a.Evidence)
	assert.Contains(t, a.Evidence.Stderr, "segmentation fault")
	line, ok := certify.StrayStdout(a.Evidence.Wire)
	assert.True(t, ok)
	assert.Equal(t, "panic: nil map", line)
	assert.Contains(t, out.progress, "    stderr tail:\n      goroutine 1 [running]:\n")
	assert.Contains(t, out.progress, `<- (not JSON) "panic: nil map"`)

	_, _, restarts, _ := p.counts()
	assert.Equal(t, 1, restarts, "the run goes on with a restarted process")
}

func TestACrashFailsOneCriterion(t *testing.T) {
	p := &fakePackage{}
	cs := []certify.Criterion{
		criterion("a/crash", crashes(p)),
		criterion("b/no-package", passes),
		criterion("c/next", usesPackage),
		criterion("d/crash-again", crashes(p)),
	}
	_, err := run(t, certify.Config{Criteria: cs, Launch: p.launch}, map[string]certify.Status{
		"a/crash": certify.StatusFail, "b/no-package": certify.StatusPass,
		"c/next": certify.StatusPass, "d/crash-again": certify.StatusFail,
	})
	require.NoError(t, err)
}

func TestDeliberateStopIsNoCrash(t *testing.T) {
	p := &fakePackage{}
	cs := []certify.Criterion{
		criterion("a/stops", func(ctx context.Context, tg *certify.Target) error {
			pkg, err := tg.Package(ctx)
			if err != nil {
				return err
			}
			return pkg.Stop(ctx)
		}),
		criterion("b/next", usesPackage),
	}
	out, err := run(t, certify.Config{Criteria: cs, Launch: p.launch}, map[string]certify.Status{
		"a/stops": certify.StatusPass, "b/next": certify.StatusPass,
	})
	require.NoError(t, err)
	assert.True(t, out.report.OK())
	_, _, restarts, _ := p.counts()
	assert.Equal(t, 1, restarts)
}

func TestPackageThatDoesNotStartFailsEachCriterion(t *testing.T) {
	p := &fakePackage{startErr: errors.New("exec: ./minimal: permission denied")}
	cs := []certify.Criterion{criterion("a/one", usesPackage), criterion("b/two", usesPackage)}
	out, err := run(t, certify.Config{Criteria: cs, Launch: p.launch}, map[string]certify.Status{
		"a/one": certify.StatusFail, "b/two": certify.StatusFail,
	})
	require.NoError(t, err)
	assert.Equal(t, "the package did not start: exec: ./minimal: permission denied", result(t, out.report, "a/one").Detail)
	assert.Equal(t, "the package did not restart: exec: ./minimal: permission denied", result(t, out.report, "b/two").Detail)
}

func TestLaunchErrors(t *testing.T) {
	cases := []struct {
		name   string
		launch certify.LaunchFunc
		status certify.Status
		detail string
	}{
		{"no launcher", nil, certify.StatusHarnessError, "no package launcher is wired into certify yet"},
		{"harness", func(context.Context, certify.LaunchSpec) (certify.Package, error) {
			return nil, certify.Harnessf("no free port")
		}, certify.StatusHarnessError, "no free port"},
		{"package", func(context.Context, certify.LaunchSpec) (certify.Package, error) {
			return nil, errors.New("command ./minimal not found in the package")
		}, certify.StatusFail, "the package could not be launched: command ./minimal not found in the package"},
		{"nil package", func(context.Context, certify.LaunchSpec) (certify.Package, error) {
			return nil, nil
		}, certify.StatusHarnessError, "the launcher returned no package"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := []certify.Criterion{criterion("a/uses", usesPackage)}
			out, err := run(t, certify.Config{Criteria: cs, Launch: tc.launch}, map[string]certify.Status{"a/uses": tc.status})
			require.NoError(t, err)
			assert.Equal(t, tc.detail, result(t, out.report, "a/uses").Detail)
		})
	}
}

func TestNotWiredIsNeverAPass(t *testing.T) {
	// The real registry with nothing wired: manifest/valid passes, every
	// other criterion that applies is a harness error, the rest skip.
	out, err := run(t, certify.Config{Criteria: certify.Criteria(), Dir: minimalDir}, nil)
	require.NoError(t, err)
	r := out.report
	for _, res := range r.Results {
		switch {
		case res.ID == "manifest/valid":
			assert.Equal(t, certify.StatusPass, res.Status)
		case res.Status == certify.StatusSkip:
			assert.Contains(t, res.Detail, "the manifest declares no")
		default:
			assert.Equal(t, certify.StatusHarnessError, res.Status, res.ID)
			assert.Contains(t, res.Detail, "wired into certify", res.ID)
		}
	}
	assert.Equal(t, 1, r.Summary.Pass)
	assert.Positive(t, r.Summary.Skip)
	assert.Equal(t, certify.ExitHarness, r.ExitCode())
}

func TestStateDirectoryFailureIsTheHarnesss(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notADir, nil, 0o644))
	p := &fakePackage{}
	cs := []certify.Criterion{criterion("a/pass", passes), criterion("b/uses", usesPackage)}
	out, err := run(t, certify.Config{Criteria: cs, Launch: p.launch, TempDir: notADir}, map[string]certify.Status{
		"a/pass": certify.StatusPass, "b/uses": certify.StatusHarnessError,
	})
	require.NoError(t, err)
	assert.Contains(t, result(t, out.report, "b/uses").Detail, "the temporary state directory could not be made")
	assert.Equal(t, certify.ExitHarness, out.report.ExitCode())
}

func TestStateDirectory(t *testing.T) {
	for _, keep := range []bool{false, true} {
		p := &fakePackage{}
		var spec certify.LaunchSpec
		launch := func(ctx context.Context, s certify.LaunchSpec) (certify.Package, error) {
			spec = s
			return p.launch(ctx, s)
		}
		var seen string
		cs := []certify.Criterion{criterion("a/uses", func(ctx context.Context, tg *certify.Target) error {
			seen = tg.StateDir
			return usesPackage(ctx, tg)
		})}
		root := t.TempDir()
		out, err := run(t, certify.Config{Criteria: cs, Launch: launch, Keep: keep, TempDir: root}, nil)
		require.NoError(t, err)
		require.NotEmpty(t, spec.StateDir)
		assert.Equal(t, seen, spec.StateDir)
		assert.Equal(t, root, filepath.Dir(spec.StateDir))
		assert.Equal(t, minimalDir, spec.Dir)
		assert.Equal(t, "minimal", spec.Manifest.Name)
		_, statErr := os.Stat(spec.StateDir)
		if keep {
			assert.NoError(t, statErr, "--keep keeps the state directory")
			assert.Equal(t, spec.StateDir, out.report.StateDir)
		} else {
			assert.ErrorIs(t, statErr, os.ErrNotExist, "the state directory is removed")
			assert.Empty(t, out.report.StateDir)
		}
	}
}

func TestInvalidManifest(t *testing.T) {
	out, err := run(t, certify.Config{Criteria: certify.Criteria(), Dir: invalidDir}, nil)
	require.NoError(t, err)
	r := out.report
	assert.Equal(t, "invalid", r.Package.Name, "an invalid manifest still names the package")
	v := result(t, r, "manifest/valid")
	assert.Equal(t, certify.StatusFail, v.Status)
	assert.Contains(t, v.Detail, "the manifest breaks 1 rule(s):")
	assert.Contains(t, v.Detail, `provides.operations[0].name`)
	assert.Contains(t, v.Detail, `operation "other.save" is not a dotted name beginning with "invalid." [names.dotted]`)
	for _, res := range r.Results {
		if res.ID != "manifest/valid" {
			assert.Equal(t, certify.StatusNotRun, res.Status, res.ID)
			assert.Equal(t, "the manifest did not load; see manifest/valid", res.Detail)
		}
	}
	assert.Equal(t, certify.Summary{Fail: 1, NotRun: len(certify.Criteria()) - 1}, r.Summary, "what never ran is neither passed nor failed")
	assert.Equal(t, certify.ExitFail, r.ExitCode())
	// The cause comes first, with the command that lists every refusal.
	assert.True(t, strings.HasPrefix(out.progress, "the manifest did not load: "), out.progress)
	assert.Contains(t, out.progress, "`open-conduit extension validate "+invalidDir+"` lists every refusal")
	var summary strings.Builder
	certify.WriteSummary(&summary, r)
	assert.Contains(t, summary.String(), fmt.Sprintf("%d criteria: 0 pass, 1 fail, 0 skip, 0 harness_error, %d not run", len(r.Results), len(r.Results)-1))

	out, err = run(t, certify.Config{Criteria: certify.Criteria(), Dir: "testdata/packages/unreadable", Select: regexp.MustCompile(`^manifest/`)}, nil)
	require.NoError(t, err)
	assert.Contains(t, result(t, out.report, "manifest/valid").Detail, "[json.syntax]")
}

func TestSelection(t *testing.T) {
	cs := []certify.Criterion{criterion("kv/a", passes), criterion("kv/b", fails), criterion("routes/c", passes)}
	out, err := run(t, certify.Config{Criteria: cs, Select: regexp.MustCompile(`^(kv/a|routes/)`)}, nil)
	require.NoError(t, err)
	r := out.report
	require.Len(t, r.Results, 2, "unselected criteria are left out, not passed")
	assert.Equal(t, "kv/a", r.Results[0].ID)
	assert.Equal(t, "routes/c", r.Results[1].ID)
	assert.Equal(t, `^(kv/a|routes/)`, r.Select)
	assert.True(t, r.OK())
	assert.NotContains(t, out.progress, "kv/b")

	_, err = certify.Run(context.Background(), certify.Config{Dir: minimalDir, Criteria: cs, Select: regexp.MustCompile(`^nothing`)})
	assert.ErrorIs(t, err, certify.ErrUsage)
	assert.ErrorContains(t, err, `--run "^nothing" selects no criterion`)
}

func TestBaseline(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	cs := []certify.Criterion{
		criterion("a/pass", passes),
		criterion("b/fail", fails),
		notApplicable(criterion("c/skip", nil)),
		criterion("d/harness", harnessBreaks),
	}
	cases := []struct {
		name     string
		baseline []string
		exit     int
		statuses map[string]certify.BaselineStatus
	}{
		{"unlisted failure fails the run", nil, certify.ExitFail, nil},
		{"listed failure does not", []string{"b/fail"}, certify.ExitHarness,
			map[string]certify.BaselineStatus{"b/fail": certify.BaselineKnownFailure}},
		{"listed pass is stale", []string{"b/fail", "a/pass"}, certify.ExitFail,
			map[string]certify.BaselineStatus{"a/pass": certify.BaselineStale, "b/fail": certify.BaselineKnownFailure}},
		{"listed skip is stale", []string{"b/fail", "c/skip"}, certify.ExitFail,
			map[string]certify.BaselineStatus{"c/skip": certify.BaselineStale}},
		{"listing a harness error hides nothing", []string{"b/fail", "d/harness"}, certify.ExitHarness,
			map[string]certify.BaselineStatus{"d/harness": certify.BaselineListed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, certify.Config{Criteria: cs, Baseline: tc.baseline}, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.exit, out.report.ExitCode())
			for id, want := range tc.statuses {
				assert.Equal(t, want, result(t, out.report, id).Baseline, id)
			}
		})
	}

	// Without the harness error, a listed failure makes the run pass.
	out, err := run(t, certify.Config{Criteria: cs[:3], Baseline: []string{"b/fail"}}, nil)
	require.NoError(t, err)
	assert.Equal(t, certify.ExitOK, out.report.ExitCode())
	assert.Contains(t, out.progress, "FAIL b/fail (")
	assert.Contains(t, out.progress, "[known failure: listed in the baseline]")
	assert.Equal(t, certify.Summary{Pass: 1, Fail: 1, Skip: 1, KnownFailure: 1}, out.report.Summary)

	// A listed ID that names no criterion is a usage error.
	_, err = certify.Run(context.Background(), certify.Config{Dir: minimalDir, Criteria: cs, Baseline: []string{"kv/nope"}})
	assert.ErrorIs(t, err, certify.ErrUsage)
	assert.ErrorContains(t, err, `baseline lists "kv/nope", which is no criterion`)

	// A listed criterion that is not selected is neither known nor stale.
	out, err = run(t, certify.Config{Criteria: cs, Baseline: []string{"b/fail"}, Select: regexp.MustCompile(`^a/`)}, nil)
	require.NoError(t, err)
	assert.Equal(t, certify.ExitOK, out.report.ExitCode())
}

func TestInterruptedRunReportsEveryCriterion(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := []certify.Criterion{
		criterion("a/cancels", func(context.Context, *certify.Target) error { cancel(); return nil }),
		criterion("b/later", passes),
	}
	var progress bytes.Buffer
	r, err := certify.Run(ctx, certify.Config{Dir: minimalDir, Criteria: cs, Progress: &progress, Timeout: longTimeout, Grace: testGrace})
	assert.ErrorIs(t, err, context.Canceled)
	require.Len(t, r.Results, 2)
	assert.Equal(t, certify.StatusPass, r.Results[0].Status)
	assert.Equal(t, certify.StatusHarnessError, r.Results[1].Status)
	assert.Contains(t, r.Results[1].Detail, "not run: the run was interrupted")
	assert.NoError(t, checkHonest(cs, nil, nil, nil, nil, render(t, r, progress.String())))
}

func TestTrace(t *testing.T) {
	p := &fakePackage{}
	cs := []certify.Criterion{criterion("a/uses", usesPackage)}
	out, err := run(t, certify.Config{Criteria: cs, Launch: p.launch}, nil)
	require.NoError(t, err)
	require.Equal(t, p.Trace(), out.report.Trace)

	var b bytes.Buffer
	require.NoError(t, certify.WriteTrace(&b, out.report.Trace))
	sc := bufio.NewScanner(&b)
	n := 0
	for sc.Scan() {
		var line struct {
			Time      string          `json:"time"`
			Direction string          `json:"direction"`
			Message   json.RawMessage `json:"message"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), "each line is one JSON object")
		assert.NotEmpty(t, line.Time)
		assert.Contains(t, []string{certify.DirectionToExtension, certify.DirectionFromExtension}, line.Direction)
		assert.True(t, json.Valid(line.Message))
		n++
	}
	assert.Equal(t, 4, n)
}

func TestStrayStdoutIsCut(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes
	line, ok := certify.StrayStdout([]certify.WireMessage{
		{Direction: certify.DirectionToExtension, Text: "not from the package"},
		{Direction: certify.DirectionFromExtension, Message: json.RawMessage(`{}`)},
		{Direction: certify.DirectionFromExtension, Text: long},
	})
	require.True(t, ok)
	assert.Equal(t, strings.Repeat("é", 100), line, "cut to 200 bytes on a character boundary")
	_, ok = certify.StrayStdout(nil)
	assert.False(t, ok)
}

func TestRunRefusesBadCriteria(t *testing.T) {
	for name, cs := range map[string][]certify.Criterion{
		"duplicate": {criterion("a/x", passes), criterion("a/x", passes)},
		"no ID":     {criterion("", passes)},
		"both a Run and a Check": {func() certify.Criterion {
			c := criterion("a/x", passes)
			c.Check = func(context.Context, conformance.PackageDriver) error { return nil }
			return c
		}()},
	} {
		_, err := certify.Run(context.Background(), certify.Config{Dir: minimalDir, Criteria: cs})
		assert.ErrorIs(t, err, certify.ErrUsage, name)
	}
	_, err := certify.Run(context.Background(), certify.Config{Dir: "testdata/packages/absent"})
	assert.ErrorIs(t, err, certify.ErrUsage)
	_, err = certify.Run(context.Background(), certify.Config{Dir: filepath.Join(minimalDir, protocol.ManifestFile)})
	assert.ErrorIs(t, err, certify.ErrUsage)
}

func TestTraceKeepsALineThatIsNotJSON(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, certify.WriteTrace(&b, []certify.WireMessage{
		{Direction: certify.DirectionFromExtension, Message: json.RawMessage(`{"broken":`)},
	}))
	var line certify.WireMessage
	require.NoError(t, json.Unmarshal(b.Bytes(), &line))
	assert.Equal(t, `{"broken":`, line.Text)
	assert.Nil(t, line.Message)
}
