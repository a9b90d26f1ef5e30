package certify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/certify"
	"github.com/open-conduit/open-conduit/internal/testbin"
)

// lenientPackage is a minimal stdlib Python package with one defect: a
// line that is not JSON is answered with a parse error and the reader
// reads on, where the transport's rule is that it ends the connection. The
// host's request that line was then waits for an answer that never comes.
const lenientPackage = `#!/usr/bin/env python3
import json, sys
here = sys.path[0]
manifest = json.load(open(here + "/open-conduit-extension.json"))
out = sys.stdout
sys.stdout = sys.stderr
def send(m):
    m["jsonrpc"] = "2.0"
    out.write(json.dumps(m) + "\n")
    out.flush()
initialized = False
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        send({"id": None, "error": {"code": -32700, "message": "parse error"}})  # THE DEFECT: reads on
        continue
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        continue
    def refuse(code, text):
        send({"id": mid, "error": {"code": -32000, "message": text, "data": {"code": code}}})
    if method == "initialize":
        if initialized:
            refuse("invalid", "initialize already succeeded")
        elif 1 not in ((msg.get("params") or {}).get("protocol_versions") or []):
            refuse("unsupported_protocol_version", "no common protocol version")
        else:
            initialized = True
            send({"id": mid, "result": {"protocol_version": 1, "manifest": manifest}})
    elif not initialized:
        refuse("invalid", "%s before initialize" % method)
    elif method in ("configure", "shutdown"):
        send({"id": mid, "result": {}})
    else:
        send({"id": mid, "error": {"code": -32601, "message": "method not found"}})
`

func writeLenientPackage(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "lenient")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.py"), []byte(lenientPackage), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "open-conduit-extension.json"),
		[]byte(`{"name": "lenient", "version": "1.0.0", "command": ["main.py"], "protocol": [1], "provides": {}}`), 0o644))
	return dir
}

func runFaults(t *testing.T, dir, sel string, timeout time.Duration, rules ...string) []certify.FaultResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	results, err := certify.RunFaults(ctx, certify.Config{Dir: dir, Launch: certify.HostLaunch(openConduit),
		Select: regexp.MustCompile(sel), Timeout: timeout, Grace: time.Second}, rules, &progress)
	require.NoError(t, err)
	require.Len(t, results, len(rules))
	t.Logf("robustness pass:\n%s", progress.String())
	return results
}

// The robustness pass over a good package: every rule of the pass acted
// (a rule that never fired would prove nothing) and the package survived
// each or failed cleanly, so the pass exits 0.
func TestFaultPassOverAGoodPackage(t *testing.T) {
	results := runFaults(t, filepath.Join("..", "extensions", "notes"), "^(lifecycle/handshake|kv/scoping|kv/atomicity)$", 20*time.Second, certify.FaultRules...)
	for _, r := range results {
		assert.GreaterOrEqual(t, r.Fired, 1, "%s fired", r.Rule)
		assert.Contains(t, []certify.FaultVerdict{certify.FaultSurvived, certify.FaultFailedCleanly}, r.Verdict, "%s: %+v", r.Rule, r)
		assert.NotEmpty(t, r.Results, r.Rule)
	}
	assert.Equal(t, certify.ExitOK, certify.FaultsExitCode(results))
}

// The negative control: a package that reads on past a line that is not
// JSON hangs the call that line was, and the pass says so and fails (exit
// 1); without the fault the same package passes the handshake, and a good
// package under the same fault fails cleanly instead of hanging.
func TestFaultPassCatchesAPackageThatHangs(t *testing.T) {
	testbin.NeedPython(t)
	t.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	lenient := writeLenientPackage(t)
	const corrupt = "corrupt dir=to-ext kind=request method=initialize nth=1"
	results := runFaults(t, lenient, "^lifecycle/handshake$", 3*time.Second, "delay dir=to-ext for=10ms", corrupt)
	assert.Equal(t, certify.FaultSurvived, results[0].Verdict, "the control: %+v", results[0])
	assert.Equal(t, certify.FaultHung, results[1].Verdict, "%+v", results[1])
	assert.Equal(t, []string{"lifecycle/handshake"}, results[1].Hung)
	assert.Equal(t, 1, results[1].Fired)
	assert.Equal(t, certify.ExitFail, certify.FaultsExitCode(results))

	good := runFaults(t, filepath.Join("..", "extensions", "notes"), "^lifecycle/handshake$", 20*time.Second, corrupt)
	assert.Equal(t, certify.FaultFailedCleanly, good[0].Verdict, "the SDK ends the connection at a line that is not JSON: %+v", good[0])

	var b bytes.Buffer
	require.NoError(t, certify.WriteFaultsJSON(&b, "lenient", results))
	var doc struct {
		Passed bool `json:"passed"`
		Rules  []struct {
			Rule, Verdict string
			Hung          []string
		} `json:"rules"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &doc))
	assert.False(t, doc.Passed)
	require.Len(t, doc.Rules, 2)
	assert.Equal(t, "hung", doc.Rules[1].Verdict)
}

// A rule no message matches never fires: the pass reports it as not
// exercised, never as survived.
func TestFaultPassNamesARuleThatNeverFired(t *testing.T) {
	results := runFaults(t, filepath.Join("..", "extensions", "notes"), "^lifecycle/handshake$", 20*time.Second, "crash method=no.such.method")
	assert.Equal(t, certify.FaultNotExercised, results[0].Verdict, "%+v", results[0])
	assert.Zero(t, results[0].Fired)
	assert.Equal(t, certify.ExitOK, certify.FaultsExitCode(results), "the package is not to blame")
}

func TestJudgeFaults(t *testing.T) {
	report := func(rs ...certify.Result) certify.Report { return certify.Report{Results: rs} }
	pass := certify.Result{ID: "a/pass", Status: certify.StatusPass}
	skip := certify.Result{ID: "a/skip", Status: certify.StatusSkip}
	fail := certify.Result{ID: "a/fail", Status: certify.StatusFail, Detail: "the package crashed"}
	hung := certify.Result{ID: "a/hung", Status: certify.StatusFail, Detail: "criterion a/hung timed out after 3s"}
	broken := certify.Result{ID: "a/broken", Status: certify.StatusHarnessError}
	for _, tc := range []struct {
		report certify.Report
		want   certify.FaultVerdict
	}{
		{report(pass, skip), certify.FaultSurvived},
		{report(pass, fail), certify.FaultFailedCleanly},
		{report(fail, hung, pass), certify.FaultHung},
		{report(fail, broken), certify.FaultHarnessError},
		{report(broken, hung), certify.FaultHung},
	} {
		assert.Equal(t, tc.want, certify.JudgeFaults("drop", tc.report).Verdict, "%+v", tc.report.Results)
	}
	assert.Equal(t, certify.ExitHarness, certify.FaultsExitCode([]certify.FaultResult{{Verdict: certify.FaultHung}, {Verdict: certify.FaultHarnessError}}))
	assert.Equal(t, certify.ExitOK, certify.FaultsExitCode(nil))
	for _, rule := range certify.FaultRules {
		require.NoError(t, certify.CheckFaultRule(rule), rule)
	}
}
