package certify_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/certify"
	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/internal/testbin"
	"github.com/open-conduit/open-conduit/protocol"
)

// openConduit is the open-conduit binary, built once for the package's
// tests: the host runs the bundled packages on it.
var openConduit string

// binDir holds openConduit and a python3 link (testbin.LinkPython).
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "certify-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	openConduit, err = testbin.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	testbin.LinkPython(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// certifyDir certifies dir through the library with the real host.
func certifyDir(t *testing.T, dir string, sel string) certify.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := certify.Config{Dir: dir, Launch: certify.HostLaunch(openConduit)}
	if sel != "" {
		cfg.Select = regexp.MustCompile(sel)
	}
	report, err := certify.Run(ctx, cfg)
	require.NoError(t, err)
	return report
}

// TestCertifyGoodPackagesOverTheWire certifies notes through the library
// under the real host: every criterion that applies passes, none is left
// to the harness, and the report carries the negotiated version and the
// wire. TestNegativeControls certifies every good package through the
// binary, with the criteria each must pass.
func TestCertifyGoodPackagesOverTheWire(t *testing.T) {
	report := certifyDir(t, filepath.Join("..", "extensions", "notes"), "")
	status := map[string]certify.Status{}
	for _, r := range report.Results {
		status[r.ID] = r.Status
		assert.Contains(t, []certify.Status{certify.StatusPass, certify.StatusSkip}, r.Status, "%s: %s", r.ID, r.Detail)
	}
	for _, id := range mustPass["notes"] {
		assert.Equal(t, certify.StatusPass, status[id], "%s must run and pass", id)
	}
	assert.Equal(t, certify.ExitOK, report.ExitCode())
	assert.Equal(t, protocol.Version(1), report.ProtocolVersion)
	assert.NotEmpty(t, report.Trace, "the wire transcript")
	for _, u := range report.Uncovered {
		assert.NotEqual(t, "validate", u.Method, "validate/answers exercises validate")
	}
}

// TestCertifyReportsTheFirstStrayLine: the wire tap keeps a stray stdout
// line from the connection and the report quotes it; the negative control
// of stdout hygiene.
func TestCertifyReportsTheFirstStrayLine(t *testing.T) {
	testbin.NeedPython(t)
	report := certifyDir(t, filepath.Join("..", "testdata", "extensions", "weak-stray-stdout"), "^lifecycle/stdout-hygiene$")
	require.Len(t, report.Results, 1)
	r := report.Results[0]
	assert.Equal(t, certify.StatusFail, r.Status)
	line, ok := certify.StrayStdout(report.Trace)
	require.True(t, ok, "the trace holds the stray line")
	assert.Contains(t, r.Detail, line)
	assert.Equal(t, certify.ExitFail, report.ExitCode())

	// The evidence is the wire around the stray line, not the run's end.
	require.NotNil(t, r.Evidence)
	ev := r.Evidence
	require.Positive(t, ev.At, "the evidence names the stray line's place in the transcript")
	require.Less(t, ev.At-ev.From, len(ev.Wire))
	stray := ev.Wire[ev.At-ev.From]
	assert.Equal(t, certify.DirectionFromExtension, stray.Direction)
	assert.Equal(t, line, stray.Text)
	assert.Equal(t, report.Trace[ev.At-1], stray, "At counts from 1 in the transcript")
	assert.Greater(t, ev.At-ev.From, 0, "messages before it are shown")
	var out strings.Builder
	certify.WriteProgress(&out, r)
	assert.Contains(t, out.String(), fmt.Sprintf("around message %d (marked *)", ev.At))
	assert.Contains(t, out.String(), "* <- (not JSON)")
}

// TestHostLaunchIsAPackageDriver runs the conformance package checks as
// subtests on notes through the Package HostLaunch makes, the way a Go
// test of an extension can without the certify runner.
func TestHostLaunchIsAPackageDriver(t *testing.T) {
	dir := filepath.Join("..", "extensions", "notes")
	m, err := protocol.LoadManifest(dir)
	require.NoError(t, err)
	p, err := certify.HostLaunch(openConduit)(t.Context(), certify.LaunchSpec{Dir: dir, Manifest: m, StateDir: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, p.Start(t.Context()))
	t.Cleanup(func() { p.Stop(context.Background()) })
	d, ok := p.(conformance.PackageDriver)
	require.True(t, ok, "the host-backed package drives the conformance checks")
	conformance.RunPackage(t, d)
}

// TestTraceSurvivesAKilledRun kills `extension certify --trace` with
// SIGKILL once its first criterion has passed: the transcript file holds
// the wire up to that point, one JSON message per line, with no run end
// to write it.
func TestTraceSurvivesAKilledRun(t *testing.T) {
	file := filepath.Join(t.TempDir(), "trace.jsonl")
	cmd := exec.Command(openConduit, "extension", "certify", "--trace", file, filepath.Join("..", "extensions", "notes"))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "PASS ") {
			break
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	killed = true
	_ = cmd.Wait()

	data, err := os.ReadFile(file)
	require.NoError(t, err)
	trace := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.GreaterOrEqual(t, len(trace), 4, "the handshake both ways and the first criterion's messages")
	for _, l := range trace {
		var m certify.WireMessage
		require.NoError(t, json.Unmarshal([]byte(l), &m), "a whole JSON line: %s", l)
		assert.Contains(t, []string{certify.DirectionToExtension, certify.DirectionFromExtension}, m.Direction)
	}
	assert.Contains(t, trace[0], `"method":"initialize"`)
}

// TestCertifyHostBehavesLikeTheRealOne reads the wire of a notes run:
// every initialize names this binary's version, every configure declares
// the manifest's kv_version, every Event offered carries the time it was
// accepted, and a payload certification made up carries no schema label
// it was not written to.
func TestCertifyHostBehavesLikeTheRealOne(t *testing.T) {
	dir := filepath.Join("..", "extensions", "notes")
	m, err := protocol.LoadManifest(dir)
	require.NoError(t, err)
	require.NotZero(t, m.KVVersion, "notes declares a KV layout, so 0 would show")
	report := certifyDir(t, dir, `^(lifecycle/handshake|routes/pure|kv/atomicity)$`)
	require.NotEmpty(t, certify.HostVersion())

	var initialize, configure, events int
	for _, w := range report.Trace {
		var msg struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if w.Direction != certify.DirectionToExtension || json.Unmarshal(w.Message, &msg) != nil {
			continue
		}
		switch msg.Method {
		case "initialize":
			initialize++
			var p protocol.InitializeParams
			require.NoError(t, json.Unmarshal(msg.Params, &p))
			if p.ProtocolVersions[0] != 999 {
				assert.Equal(t, certify.HostVersion(), p.Host.Version, "initialize: %s", msg.Params)
			}
		case "configure":
			configure++
			var p protocol.ConfigureParams
			require.NoError(t, json.Unmarshal(msg.Params, &p))
			assert.Equal(t, m.KVVersion, p.KV.Declared, "configure: %s", msg.Params)
		case "route.match":
			events++
			var p protocol.RouteMatchParams
			require.NoError(t, json.Unmarshal(msg.Params, &p))
			assert.False(t, p.Event.AcceptedAt.IsZero(), "an Event accepted at the zero time: %s", msg.Params)
			if strings.HasPrefix(p.Event.DeliveryID, "certify-") {
				assert.Empty(t, p.Event.Schema, "a made-up payload labelled with a schema it was not written to: %s", msg.Params)
			}
		}
	}
	assert.Positive(t, initialize)
	assert.Greater(t, configure, 1, "the supervised handshake and the checks' own")
	assert.Positive(t, events)
}
