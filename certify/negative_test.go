package certify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/certify"
	"github.com/open-conduit/open-conduit/internal/testbin"
	"github.com/open-conduit/open-conduit/protocol"
)

// weakened maps each negative control under testdata/extensions to the one
// criterion it is built to fail. Every other package there, like the
// bundled notes and runner, must pass everything that applies to it.
var weakened = map[string]string{
	"weak-blind-retry":       "kv/atomicity",
	"weak-cancel-goes-on":    "cancellation/honoured",
	"weak-check-shape":       "checks/shape",
	"weak-drifting-next":     "transactions/deadline",
	"weak-echo-validate":     "validate/answers",
	"weak-hang-in-tx":        "transactions/deadline",
	"weak-ignore-cancel":     "cancellation/honoured",
	"weak-ignore-eof":        "lifecycle/stdin-eof",
	"weak-ignore-sigterm":    "lifecycle/sigterm",
	"weak-impure-route":      "routes/pure",
	"weak-kv-migration":      "kv/migration",
	"weak-leaky-errors":      "wire/unauthored-internal",
	"weak-lenient-reader":    "wire/malformed-closes",
	"weak-long-progress":     "wait/progress",
	"weak-nonatomic-emit":    "emissions/atomic",
	"weak-nonidempotent-op":  "operations/idempotent",
	"weak-refuse-input":      "operations/idempotent",
	"weak-restless-scan":     "ingress/stable-scan",
	"weak-schema-blind":      "schemas/readable",
	"weak-serve-before-init": "wire/initialize-first",
	"weak-slow-start":        "lifecycle/start-bound",
	"weak-slow-task":         "tasks/interval",
	"weak-stray-stdout":      "lifecycle/stdout-hygiene",
	"weak-unbounded-queue":   "flow/overloaded",
	"weak-unclipped-display": "routes/display",
	"weak-undeclared-call":   "permissions/declared",
	"weak-unknown-method":    "wire/method-not-found",
	"weak-unscoped-kv":       "kv/scoping",
	"weak-volatile-state":    "lifecycle/durable-state",
}

// mustPass lists, for each good package, the criteria that must run and
// pass on it: every criterion that applies to what it declares and finds
// something to check.
var mustPass = func() map[string][]string {
	lifecycle := []string{"lifecycle/crash-restart", "lifecycle/handshake", "lifecycle/manifest-match", "lifecycle/shutdown",
		"lifecycle/sigterm", "lifecycle/start-bound", "lifecycle/stdin-eof", "lifecycle/stdout-hygiene", "lifecycle/version-mismatch", "manifest/valid",
		"permissions/declared", "validate/answers", "wire/initialize-first", "wire/malformed-closes", "wire/method-not-found"}
	return map[string][]string{
		"notes": append([]string{"cancellation/honoured", "checks/shape", "emissions/atomic", "emissions/idempotent", "flow/overloaded", "ingress/stable-scan", "kv/atomicity",
			"kv/migration", "kv/scoping", "lifecycle/durable-state", "operations/idempotent", "routes/display", "routes/pure", "routes/samples", "schemas/current-version", "schemas/readable",
			"tasks/interval", "transactions/deadline", "wire/unauthored-internal"}, lifecycle...),
		"runner": append([]string{"cancellation/honoured", "executor/controls", "executor/lifecycle"}, lifecycle...),
		"pynotes": append([]string{"cancellation/honoured", "flow/overloaded", "kv/atomicity", "kv/scoping", "lifecycle/durable-state", "operations/idempotent", "routes/display",
			"routes/pure", "schemas/readable", "wire/unauthored-internal"}, lifecycle...),
	}
}()

// testPackages are the package directories under testdata/extensions, by
// name: every directory holding a manifest.
func testPackages(t *testing.T) map[string]string {
	t.Helper()
	root := filepath.Join("..", "testdata", "extensions")
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	dirs := map[string]string{}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if _, err := os.Stat(filepath.Join(dir, protocol.ManifestFile)); e.IsDir() && err == nil {
			dirs[e.Name()] = dir
		}
	}
	return dirs
}

// TestNegativeControlsAreWellFormed needs no running package: each
// weakened package is there, its manifest is valid and named after its
// directory, its criterion exists and applies to it, and its command is
// an executable file inside it.
func TestNegativeControlsAreWellFormed(t *testing.T) {
	dirs := testPackages(t)
	for name := range dirs {
		if strings.HasPrefix(name, "weak-") {
			assert.Contains(t, weakened, name, "a negative control without the criterion it must fail")
		}
	}
	for name, id := range weakened {
		t.Run(name, func(t *testing.T) {
			dir, ok := dirs[name]
			require.True(t, ok, "testdata/extensions/%s is missing", name)
			m, err := protocol.LoadManifest(dir)
			require.NoError(t, err)
			assert.Equal(t, name, m.Name)
			c, ok := certify.Lookup(id)
			require.True(t, ok, "no criterion %s", id)
			if c.Applies != nil {
				applies, reason := c.Applies(m)
				assert.True(t, applies, "%s does not apply: %s", id, reason)
			}
			info, err := os.Stat(filepath.Join(dir, filepath.FromSlash(m.Command[0])))
			require.NoError(t, err)
			assert.NotZero(t, info.Mode()&0o111, "%s is not executable", m.Command[0])
		})
	}
}

// certifyReport is the part of the --json report the test reads.
type certifyReport struct {
	Package struct {
		Name string `json:"name"`
	} `json:"package"`
	ExitCode int `json:"exit_code"`
	Criteria []struct {
		ID     string         `json:"id"`
		Status certify.Status `json:"status"`
		Detail string         `json:"detail"`
	} `json:"criteria"`
}

// TestNegativeControls certifies every package over the wire with the
// built binary, as CI would: each weakened package fails exactly the
// criterion it is built to fail, and every good one (the bundled notes and
// runner, the Python example) passes everything that applies. No package
// may leave a criterion as harness_error.
func TestNegativeControls(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and certifies every package")
	}
	testbin.StatInputs(t, "..")
	bin := openConduit
	path := "PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH")

	packages := map[string]string{
		"notes":  filepath.Join("..", "extensions", "notes"),
		"runner": filepath.Join("..", "extensions", "runner"),
		// agent's runs take a script, from its certify/inputs.json.
		"agent": filepath.Join("..", "extensions", "agent"),
	}
	for name, dir := range testPackages(t) {
		packages[name] = dir
	}
	names := make([]string, 0, len(packages))
	for name := range packages {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		dir := packages[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, err := protocol.LoadManifest(dir)
			require.NoError(t, err)
			if !m.RunsOnHost() {
				testbin.NeedPython(t)
			}
			report, code, stdout := certifyPackage(t, bin, path, dir)
			assert.Equal(t, name, report.Package.Name)

			want := weakened[name]
			var failed, broken []string
			status := map[string]certify.Status{}
			for _, c := range report.Criteria {
				status[c.ID] = c.Status
				switch c.Status {
				case certify.StatusFail:
					failed = append(failed, c.ID)
				case certify.StatusHarnessError:
					broken = append(broken, c.ID+": "+c.Detail)
				}
			}
			assert.Empty(t, broken, "harness errors\n%s", stdout)
			for _, id := range mustPass[name] {
				assert.Equal(t, certify.StatusPass, status[id], "%s must run and pass\n%s", id, stdout)
			}
			if want == "" {
				assert.Empty(t, failed, "a good package failed\n%s", stdout)
				assert.Equal(t, certify.ExitOK, code, "exit status\n%s", stdout)
			} else {
				assert.Equal(t, []string{want}, failed, "the criteria it failed\n%s", stdout)
				assert.Equal(t, certify.ExitFail, code, "exit status\n%s", stdout)
			}
			assert.Equal(t, code, report.ExitCode, "the exit status the report gives")
		})
	}
}

// certifyPackage runs `open-conduit extension certify --json` on dir, with
// path as its PATH, and returns the report, the exit status and the
// progress output.
func certifyPackage(t *testing.T, bin, path, dir string) (certifyReport, int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	file := filepath.Join(t.TempDir(), "report.json")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "extension", "certify", "--json", file, dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), path)
	err := cmd.Run()
	code := 0
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	data, err := os.ReadFile(file)
	require.NoError(t, err, "no JSON report (exit status %d)\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	var report certifyReport
	require.NoError(t, json.Unmarshal(data, &report))
	return report, code, stdout.String() + stderr.String()
}
