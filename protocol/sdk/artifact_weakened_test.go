//go:build artifact_weakened

// The negative controls of the in-flight ArtifactWriter's tests: each
// weakened copy of artifact.go below breaks one promise of the writer, and
// the tests must fail on it by an assertion, not by hanging into the test
// timeout. It builds and runs the tests once per copy, so it is behind a
// build tag:
//
//	go test -tags artifact_weakened ./protocol/sdk -run TestArtifactWeakenedCopiesFail -v

package sdk_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// artifactWeakenings each make one exact replacement in artifact.go,
// named after the promise it breaks.
var artifactWeakenings = []struct{ name, old, new string }{
	{"sent-before-the-ack-before-it",
		"\tif err := w.settle(); err != nil {\n\t\treturn err\n\t}\n\tp, err := w.next.Send(w.ctx)",
		"\tp, err := w.next.Send(w.ctx)"},
	{"sent-then-waits-for-the-ack-before-it",
		"\tif err := w.settle(); err != nil {\n\t\treturn err\n\t}\n\tp, err := w.next.Send(w.ctx)\n\tif err != nil {\n\t\tw.err = err\n\t\treturn err\n\t}",
		"\tp, err := w.next.Send(w.ctx)\n\tif err != nil {\n\t\tw.err = err\n\t\treturn err\n\t}\n\tif err := w.settle(); err != nil {\n\t\treturn err\n\t}"},
	{"write-waits-for-its-ack",
		"\tw.inflight, w.want, w.sent = p, want, want\n\treturn nil",
		"\tw.inflight, w.want, w.sent = p, want, want\n\treturn w.settle()"},
	{"failure-in-flight-dropped",
		"\terr := p.Wait(&r)\n\tif err == nil {\n\t\terr = w.checkAck(r, w.want)\n\t}",
		"\t_ = p.Wait(&r)\n\terr := error(nil)"},
	{"failure-not-kept",
		"\tif err != nil && w.err == nil {\n\t\tw.err = err\n\t}\n\treturn w.err\n}",
		"\treturn err\n}"},
	{"commit-does-not-wait",
		"\tif err := w.settle(); err != nil {\n\t\treturn protocol.ArtifactCommitResult{}, err\n\t}\n\tvar r protocol.ArtifactCommitResult",
		"\tvar r protocol.ArtifactCommitResult"},
}

var (
	failedArtifactTest = regexp.MustCompile(`(?m)^\s*--- FAIL: (TestArtifactWriter\S*)`)
	// brokenPromise is how an assertion of the writer's tests names what
	// failed: testify's Messages, or a t.Fatalf of the test file.
	brokenPromise = regexp.MustCompile(`(?m)^\s*(?:Messages:\s*|artifact_test\.go:\d+: )(\S.*)$`)
)

// TestArtifactWeakenedCopiesFail runs the writer's tests against each
// weakened copy of artifact.go (go test -overlay) and requires one to fail
// by an assertion: not the build, not the test timeout. The original must
// pass.
func TestArtifactWeakenedCopiesFail(t *testing.T) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	artifactGo := filepath.Join(root, "protocol", "sdk", "artifact.go")
	original, err := os.ReadFile(artifactGo)
	require.NoError(t, err)
	work := t.TempDir()

	// run runs the writer's tests with source as artifact.go (nil: the
	// original) and returns the tests that failed, and the output.
	run := func(name string, source []byte) ([]string, string, error) {
		args := []string{"test", "-count=1", "-failfast", "-timeout=2m", "-run=^TestArtifactWriter"}
		if source != nil {
			weak := filepath.Join(work, name+".go")
			require.NoError(t, os.WriteFile(weak, source, 0o644))
			overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{artifactGo: weak}})
			require.NoError(t, err)
			ov := filepath.Join(work, name+".json")
			require.NoError(t, os.WriteFile(ov, overlay, 0o644))
			args = append(args, "-overlay", ov)
		}
		cmd := exec.Command("go", append(args, "./protocol/sdk")...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		var failed []string
		for _, m := range failedArtifactTest.FindAllStringSubmatch(string(out), -1) {
			failed = append(failed, m[1])
		}
		return failed, string(out), err
	}

	failed, out, err := run("original", nil)
	require.NoError(t, err, "the tests fail on the original artifact.go\n%s", out)
	require.Empty(t, failed)

	for _, w := range artifactWeakenings {
		t.Run(w.name, func(t *testing.T) {
			require.Equal(t, 1, bytes.Count(original, []byte(w.old)), "no longer applies to artifact.go")
			failed, out, err := run(w.name, bytes.Replace(original, []byte(w.old), []byte(w.new), 1))
			require.Error(t, err, "every test passed on this weakened copy")
			assert.NotContains(t, out, "panic: test timed out", "failed only by the test timeout")
			if assert.NotEmpty(t, failed, "no test failed (the build?)\n%s", out) {
				var promises []string
				for _, m := range brokenPromise.FindAllStringSubmatch(out, 3) {
					promises = append(promises, m[1])
				}
				t.Logf("failed %v: %q", failed, promises)
			}
		})
	}
}
