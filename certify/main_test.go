package certify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/certify"
)

// command runs the command with fake criteria and returns its exit status,
// stdout and stderr.
func command(t *testing.T, c certify.Command, args ...string) (int, string, string) {
	t.Helper()
	if c.Grace == 0 {
		c.Grace = testGrace
	}
	var stdout, stderr bytes.Buffer
	code := c.Main(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestMainExitStatus(t *testing.T) {
	pass := []certify.Criterion{criterion("a/pass", passes), notApplicable(criterion("b/skip", nil))}
	failing := append(pass, criterion("c/fail", fails))
	broken := append(pass, criterion("d/harness", harnessBreaks))

	code, out, _ := command(t, certify.Command{Criteria: pass}, minimalDir)
	assert.Equal(t, certify.ExitOK, code)
	assert.Contains(t, out, "PASS a/pass (")
	assert.Contains(t, out, "SKIP b/skip: the manifest declares no widget\n")
	assert.Contains(t, out, "2 criteria: 1 pass, 0 fail, 1 skip, 0 harness_error")
	assert.True(t, strings.HasSuffix(out, "\nok\n"))

	code, out, _ = command(t, certify.Command{Criteria: failing}, minimalDir)
	assert.Equal(t, certify.ExitFail, code)
	assert.True(t, strings.HasSuffix(out, "\nFAIL\n"))

	code, out, _ = command(t, certify.Command{Criteria: broken}, minimalDir)
	assert.Equal(t, certify.ExitHarness, code)
	assert.Contains(t, out, "HARNESS ERROR")

	// The real registry, unwired: the harness's fault, not the package's.
	code, _, _ = command(t, certify.Command{}, minimalDir)
	assert.Equal(t, certify.ExitHarness, code)
	code, _, _ = command(t, certify.Command{}, invalidDir)
	assert.Equal(t, certify.ExitFail, code)
}

func TestMainWritesReports(t *testing.T) {
	dir := t.TempDir()
	p := &fakePackage{}
	cs := []certify.Criterion{criterion("a/uses", usesPackage), criterion("b/fail", fails), notApplicable(criterion("c/skip", nil))}
	jsonFile, junitFile, traceFile := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.xml"), filepath.Join(dir, "t.jsonl")
	baseline := filepath.Join(dir, "baseline")
	require.NoError(t, os.WriteFile(baseline, []byte("# known\nb/fail  # tracked elsewhere\n"), 0o644))

	// Flags before and after DIR.
	code, stdout, stderr := command(t, certify.Command{Criteria: cs, Launch: p.launch},
		"--json", jsonFile, minimalDir, "--junit", junitFile, "--trace", traceFile, "--baseline", baseline)
	require.Empty(t, stderr)
	assert.Equal(t, certify.ExitOK, code, stdout)

	j, err := os.ReadFile(jsonFile)
	require.NoError(t, err)
	x, err := os.ReadFile(junitFile)
	require.NoError(t, err)
	var parsed parsedJSON
	require.NoError(t, json.Unmarshal(j, &parsed))
	assert.Equal(t, "known_failure", parsed.Criteria[1].Baseline)
	assert.Equal(t, "minimal", parsed.Package.Name)

	var progress strings.Builder
	for _, line := range strings.SplitAfter(stdout, "\n") {
		if line == "\n" {
			break // the summary follows
		}
		progress.WriteString(line)
	}
	m := loadManifest(t, minimalDir)
	assert.NoError(t, checkHonest(cs, m, nil, []string{"b/fail"}, nil,
		outputs{progress: progress.String(), json: j, junit: x, exit: code}))

	trace, err := os.ReadFile(traceFile)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(trace)), "\n")
	assert.Len(t, lines, 4)
	for _, l := range lines {
		assert.True(t, json.Valid([]byte(l)), l)
	}
}

func TestMainUsageErrors(t *testing.T) {
	cs := []certify.Criterion{criterion("a/pass", passes)}
	dir := t.TempDir()
	unknown := filepath.Join(dir, "unknown")
	require.NoError(t, os.WriteFile(unknown, []byte("a/pass\nkv/nope\n"), 0o644))
	twice := filepath.Join(dir, "twice")
	require.NoError(t, os.WriteFile(twice, []byte("a/pass\na/pass\n"), 0o644))
	cases := []struct {
		args []string
		want string
	}{
		{nil, "no package directory"},
		{[]string{minimalDir, fullDir}, "one package directory, not 2"},
		{[]string{"--run", "(", minimalDir}, "--run: error parsing regexp"},
		{[]string{"--run", "^zzz", minimalDir}, `--run "^zzz" selects no criterion`},
		{[]string{"--baseline", unknown, minimalDir}, `baseline lists "kv/nope", which is no criterion`},
		{[]string{"--baseline", twice, minimalDir}, "a/pass is already listed on line 1"},
		{[]string{"--baseline", filepath.Join(dir, "absent"), minimalDir}, "no such file"},
		{[]string{"testdata/packages/absent"}, "no such directory: testdata/packages/absent"},
		{[]string{"--list", "testdata/packages/absent"}, "no such directory: testdata/packages/absent"},
		{[]string{"--json", minimalDir, minimalDir}, "is a directory"},
		{[]string{"--junit", filepath.Join(dir, "absent", "r.xml"), minimalDir}, "cannot be written"},
		{[]string{"--trace", filepath.Join(dir, "absent", "t.jsonl"), minimalDir}, "cannot be written"},
		{[]string{"--json", "-", "--trace", "-", minimalDir}, "only one of --json, --junit, --trace and --faults-json"},
		{[]string{"--timeout", "0s", minimalDir}, "--timeout must be positive"},
		{[]string{"--bogus", minimalDir}, "flag provided but not defined: -bogus"},
	}
	for _, tc := range cases {
		code, stdout, stderr := command(t, certify.Command{Criteria: cs}, tc.args...)
		assert.Equal(t, certify.ExitUsage, code, "%v", tc.args)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
		assert.Empty(t, stdout, "%v", tc.args)
	}
}

func TestMainTimeoutFlag(t *testing.T) {
	p := &fakePackage{}
	cs := []certify.Criterion{criterion("a/hangs", blocksUntilDeadline), criterion("b/next", usesPackage)}
	code, out, _ := command(t, certify.Command{Criteria: cs, Launch: p.launch}, "--timeout", "200ms", minimalDir)
	assert.Equal(t, certify.ExitFail, code)
	assert.Contains(t, out, "    criterion a/hangs timed out after 200ms\n")
	assert.Regexp(t, `(?m)^PASS b/next \(\d+ms\)$`, out, "the run goes on")
}

func TestMainKeep(t *testing.T) {
	p := &fakePackage{}
	cs := []certify.Criterion{criterion("a/uses", usesPackage)}
	code, out, _ := command(t, certify.Command{Criteria: cs, Launch: p.launch}, "--keep", minimalDir)
	assert.Equal(t, certify.ExitOK, code)
	m := regexp.MustCompile(`(?m)^state directory kept: (.+)$`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	t.Cleanup(func() { os.RemoveAll(m[1]) })
	info, err := os.Stat(m[1])
	require.NoError(t, err)
	assert.True(t, info.IsDir())
}

func TestMainList(t *testing.T) {
	code, out, stderr := command(t, certify.Command{}, "--list")
	require.Empty(t, stderr)
	assert.Equal(t, certify.ExitOK, code)
	golden(t, "list.txt", []byte(out))
	for _, c := range certify.Criteria() {
		assert.Contains(t, out, "\n"+c.ID+"  "+c.Title+"\n")
		assert.Contains(t, out, "    section: "+c.Section+"\n")
	}

	// With a pattern and a package: only the selected criteria, and whether
	// each applies.
	code, out, _ = command(t, certify.Command{}, "--list", "--run", "^routes/", minimalDir)
	assert.Equal(t, certify.ExitOK, code)
	assert.Contains(t, out, "criteria version 2: 3 criteria\n")
	assert.Contains(t, out, "    applies: no, the manifest declares no route handler\n")
	assert.NotContains(t, out, "kv/scoping")
	code, out, _ = command(t, certify.Command{}, "--list", "--run", "^manifest/", fullDir)
	assert.Equal(t, certify.ExitOK, code)
	assert.Contains(t, out, "    applies: yes\n")

	code, _, stderr = command(t, certify.Command{}, "--list", invalidDir)
	assert.Equal(t, certify.ExitFail, code)
	assert.Contains(t, stderr, "[names.dotted]")
}

// --help and -h print one usage on stdout and exit 0; each flag's line
// names its argument once.
func TestMainHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "-help"} {
		code, stdout, stderr := command(t, certify.Command{}, arg)
		assert.Equal(t, certify.ExitOK, code, arg)
		assert.Empty(t, stderr, arg)
		assert.Equal(t, 1, strings.Count(stdout, "usage: open-conduit extension certify"), arg)
		for _, flag := range []string{"--json FILE", "--junit FILE", "--trace FILE", "--baseline FILE", "--run REGEXP", "--timeout DURATION", "--list", "--keep"} {
			assert.Contains(t, stdout, "  "+flag+" ", arg)
		}
		for _, line := range strings.Split(stdout, "\n") {
			if strings.Contains(line, "--timeout") {
				assert.Equal(t, 1, strings.Count(line, "DURATION"), "the --timeout line repeats DURATION: %q", line)
			}
		}
	}
}

func TestMainSummaryCountsOneCriterion(t *testing.T) {
	code, out, _ := command(t, certify.Command{Criteria: []certify.Criterion{criterion("a/pass", passes)}}, minimalDir)
	assert.Equal(t, certify.ExitOK, code)
	assert.Contains(t, out, "\n1 criterion: 1 pass, 0 fail")
	_, out, _ = command(t, certify.Command{Criteria: []certify.Criterion{criterion("a/pass", passes)}}, "--list")
	assert.Contains(t, out, "criteria version 2: 1 criterion\n")
}

// - writes a report to standard output, which then holds nothing else:
// progress and the summary go to standard error.
func TestMainReportToStandardOutput(t *testing.T) {
	cs := []certify.Criterion{criterion("a/pass", passes), criterion("b/fail", fails)}
	code, stdout, stderr := command(t, certify.Command{Criteria: cs}, "--json", "-", minimalDir)
	assert.Equal(t, certify.ExitFail, code)
	var parsed parsedJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &parsed), stdout)
	assert.Len(t, parsed.Criteria, 2)
	assert.Contains(t, stderr, "PASS a/pass")
	assert.Contains(t, stderr, "2 criteria: 1 pass, 1 fail")

	code, stdout, _ = command(t, certify.Command{Criteria: cs}, "--junit", "-", minimalDir)
	assert.Equal(t, certify.ExitFail, code)
	assert.True(t, strings.HasPrefix(stdout, "<?xml"), stdout)
}

// The report paths are checked before anything runs: a bad one costs no
// run.
func TestMainChecksReportPathsFirst(t *testing.T) {
	ran := false
	cs := []certify.Criterion{criterion("a/pass", func(context.Context, *certify.Target) error { ran = true; return nil })}
	code, _, stderr := command(t, certify.Command{Criteria: cs}, "--json", filepath.Join(t.TempDir(), "no", "r.json"), minimalDir)
	assert.Equal(t, certify.ExitUsage, code)
	assert.Contains(t, stderr, "--json: ")
	assert.False(t, ran, "the run started before the report path was checked")
}

// --trace streams: while a criterion still runs, the file already holds
// every message recorded so far, so a run killed then keeps them.
func TestMainTraceStreams(t *testing.T) {
	p := &fakePackage{}
	file := filepath.Join(t.TempDir(), "trace.jsonl")
	seen := make(chan []string, 1)
	cs := []certify.Criterion{
		criterion("a/uses", usesPackage),
		criterion("b/looks", func(ctx context.Context, t *certify.Target) error {
			data, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			seen <- strings.Split(strings.TrimSpace(string(data)), "\n")
			return nil
		}),
	}
	code, stdout, stderr := command(t, certify.Command{Criteria: cs, Launch: p.launch}, "--trace", file, minimalDir)
	require.Equal(t, certify.ExitOK, code, stdout+stderr)
	during := <-seen
	require.Len(t, during, 4, "initialize and route.match, both ways, before the run ended")
	for _, l := range during {
		var m certify.WireMessage
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		assert.NotEmpty(t, m.Direction)
	}
	assert.Contains(t, during[2], `"method":"route.match"`)
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, strings.Join(during, "\n")+"\n", string(after), "the run adds nothing at its end")
}
