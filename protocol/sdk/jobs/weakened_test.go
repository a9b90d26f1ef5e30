//go:build jobs_weakened

// The negative controls of this package's tests: each weakened copy of
// jobs.go below, and each mutant of the certify self-check that edits
// jobs.go alone, must fail at least one of them. It builds and runs the
// package's tests once per copy (a few minutes), so it is behind a build
// tag:
//
//	go test -tags jobs_weakened ./protocol/sdk/jobs -run TestWeakenedCopiesFail -v -timeout 30m

package jobs_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/internal/mutants"
)

const jobsGo = "protocol/sdk/jobs/jobs.go"

// weakenings are breaks of the job model's obligations beyond the mutant
// table's: each one exact replacement in jobs.go, named after what it
// breaks.
var weakenings = []struct{ name, old, new string }{
	{"no-setpgid", "cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}", "cmd.SysProcAttr = &syscall.SysProcAttr{}"},
	{"run-dir-not-its-digest", "hex.EncodeToString(sum[:12])", "hex.EncodeToString(sum[:8])"},
	{"persist-refusal-keeps-running", "\t\tx.kill(j.rec, j.done)\n\t\treturn protocol.ExecutorRunResult{}, err", "\t\treturn protocol.ExecutorRunResult{}, err"},
	{"recovery-not-on-disk", "err = os.WriteFile(filepath.Join(dir, MetaFile), meta, 0o600)", "err = nil"},
	{"recovery-not-persisted", "err = host.PersistRecovery(ctx, p.RunID, meta)", "err = nil"},
	{"recover-any-directory", "if !x.ownRunDir(rec.Dir, rec.RunID) {", "if false && !x.ownRunDir(rec.Dir, rec.RunID) {"},
	{"recover-follows-links", "return err == nil && rel == filepath.Base(want)", `return err == nil && rel != ""`},
	{"recover-trusts-metadata", "err != nil || !found || onDisk != rec", "err != nil || !found || onDisk.Dir != rec.Dir"},
	{"recover-any-attempt", `rec.ExecutionID != "" && p.Execution.ID != "" && rec.ExecutionID != p.Execution.ID`, "false"},
	{"recover-adopts-gone-job", "if _, ok := readExit(rec.Dir); !ok {", "if _, ok := readExit(rec.Dir); !ok && false {"},
	{"refused-run-forgotten", "x.refused[p.RunID] = rec", "_ = rec"},
	{"report-every-wait", "if j.reported == nil {", "if true {"},
	{"settle-ignores-recorded-status", "if recorded, ok := readExit(j.rec.Dir); ok {", "if recorded, ok := readExit(j.rec.Dir); ok && false {"},
	{"status-not-recorded", `printf '%s\n' "$status" > "$2.tmp" && mv "$2.tmp" "$2"`, ":"},
	{"sigkill-leader-only", "_ = syscall.Kill(-pgid, syscall.SIGKILL)", "_ = syscall.Kill(pgid, syscall.SIGKILL)"},
	{"stop-not-marked", "\t\tj.stopped = true\n\t\tj.mu.Unlock()\n\t\treturn x.kill(j.rec, j.done), nil", "\t\tj.mu.Unlock()\n\t\treturn x.kill(j.rec, j.done), nil"},
	{"stop-ignores-start-time", "rec.Start != 0 && cur != 0 && cur != rec.Start", "false && cur != 0"},
	{"interrupt-sends-sigterm", "syscall.Kill(-j.rec.PGID, syscall.SIGINT)", "syscall.Kill(-j.rec.PGID, syscall.SIGTERM)"},
	{"interrupt-leader-only", "syscall.Kill(-j.rec.PGID, syscall.SIGINT)", "syscall.Kill(j.rec.PGID, syscall.SIGINT)"},
	{"layer-overrides-toolbelt", "env := maps.Clone(p.Env)\n\tif env == nil {\n\t\tenv = map[string]string{}\n\t}\n\tmaps.Copy(env, sdk.ToolbeltOf(p).Env())",
		"env := map[string]string{}\n\tmaps.Copy(env, sdk.ToolbeltOf(p).Env())\n\tmaps.Copy(env, p.Env)"},
	{"stderr-dropped", "cmd.Stdin, cmd.Stdout, cmd.Stderr = in, outs[0], outs[len(outs)-1]", "cmd.Stdin, cmd.Stdout, cmd.Stderr = in, outs[0], nil"},
	{"events-not-json-lines", "lines = append(lines, string(b))", "lines = append(lines, string(b[:0])+ev.ID)"},
	{"live-whole-file", "from := max(size-n, 0)", "from := int64(0)"},
	{"forget-unheld-running", "if found && procwatch.Running(rec.PID, rec.Start) {", "if found && procwatch.Running(rec.PID, rec.Start) && false {"},
	{"forget-keeps-directory", "if err := os.RemoveAll(j.rec.Dir); err != nil {", "if err := error(nil); err != nil {"},
	{"initialize-state-dir-itself", `dir = filepath.Join(p.StateDir, "executors", x.spec.Name)`, "dir = p.StateDir"},
	{"run-id-twice", "if _, err := x.lookup(p.RunID); err == nil {", "if _, err := x.lookup(p.RunID); err == nil && false {"},
	{"new-accepts-three-outputs", " || len(spec.Outputs) > 2 {", " {"},
	{"no-start-time", "Start: procwatch.Identity(pid)}", "Start: 0}"},
}

// weakenedCopy is one broken jobs.go to run the tests against.
type weakenedCopy struct {
	name   string
	source []byte
}

func weakenedCopies(t *testing.T, root string) []weakenedCopy {
	t.Helper()
	original, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(jobsGo)))
	require.NoError(t, err)
	var copies []weakenedCopy
	for _, w := range weakenings {
		require.Equal(t, 1, bytes.Count(original, []byte(w.old)), "%s no longer applies to jobs.go", w.name)
		copies = append(copies, weakenedCopy{"own/" + w.name, bytes.Replace(original, []byte(w.old), []byte(w.new), 1)})
	}
	for _, m := range mutants.All() {
		onlyJobs := len(m.Edits) > 0
		for _, e := range m.Edits {
			onlyJobs = onlyJobs && e.File == jobsGo
		}
		if !onlyJobs {
			continue
		}
		files, err := mutants.Apply(root, m)
		require.NoError(t, err)
		copies = append(copies, weakenedCopy{"mutant/" + m.Name, files[jobsGo]})
	}
	return copies
}

var failedTest = regexp.MustCompile(`(?m)^\s*--- FAIL: (Test\w+)`)

// TestWeakenedCopiesFail runs this package's tests against each weakened
// copy of jobs.go (go test -overlay) and requires a test to fail, not the
// build; and against the original, which must pass.
func TestWeakenedCopiesFail(t *testing.T) {
	root, err := mutants.ModuleRoot(".")
	require.NoError(t, err)
	work := t.TempDir()
	// testsOf runs the package's tests with source as jobs.go (nil: the
	// original) and returns the tests that failed, and the output.
	testsOf := func(name string, source []byte) ([]string, string, error) {
		args := []string{"test", "-count=1", "-timeout=5m"}
		if source != nil {
			dir := filepath.Join(work, strings.ReplaceAll(name, "/", "_"))
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "jobs.go"), source, 0o644))
			overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{
				filepath.Join(root, filepath.FromSlash(jobsGo)): filepath.Join(dir, "jobs.go")}})
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644))
			args = append(args, "-overlay", filepath.Join(dir, "overlay.json"))
		}
		cmd := exec.Command("go", append(args, "./protocol/sdk/jobs")...)
		cmd.Dir = root
		// A group of its own: a copy that starts jobs in the test's group
		// (no-setpgid) leaves them there, killed with it below.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.CombinedOutput()
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		var failed []string
		for _, m := range failedTest.FindAllStringSubmatch(string(out), -1) {
			failed = append(failed, m[1])
		}
		return failed, string(out), err
	}

	failed, out, err := testsOf("original", nil)
	require.NoError(t, err, "the tests fail on the original jobs.go\n%s", out)
	require.Empty(t, failed)

	copies := weakenedCopies(t, root)
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, c := range copies {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			failed, out, err := testsOf(c.name, c.source)
			if assert.Error(t, err, "%s: every test passed on this weakened copy", c.name) &&
				assert.NotEmpty(t, failed, "%s: no test failed (the build?)\n%s", c.name, out) {
				t.Logf("%s: failed %v", c.name, failed)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d weakened copies", len(copies))
}
