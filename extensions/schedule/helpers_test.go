package schedule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/schedule"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

func TestMain(m *testing.M) {
	// Run by the host as "open-conduit extension-run schedule" would be.
	if len(os.Args) == 3 && os.Args[1] == "extension-run" && os.Args[2] == schedule.Name {
		if err := sdk.Serve(schedule.Extension()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// testContext bounds a test so a bug fails it rather than hanging it.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// scheduleBinary builds cmd/schedule once per test run, exactly as a third
// party builds its extension.
func scheduleBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "schedule-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "schedule")
		out, err := exec.Command("go", "build", "-o", binPath, "./cmd/schedule").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// mode is how a test reaches the extension over the SDK's fake host.
type mode struct {
	name  string
	start func(t *testing.T, host *sdktest.Host) sdk.Caller
}

var modes = []mode{
	{"inprocess", func(t *testing.T, host *sdktest.Host) sdk.Caller {
		c, err := sdk.Attach(schedule.Extension(), host)
		require.NoError(t, err)
		return c
	}},
	{"process", func(t *testing.T, host *sdktest.Host) sdk.Caller {
		p, err := sdktest.Start(exec.Command(scheduleBinary(t)), host)
		require.NoError(t, err)
		t.Cleanup(func() {
			p.Conn.Close() // end of input: the extension exits
			select {
			case <-p.Done:
			case <-time.After(30 * time.Second):
				t.Errorf("the extension did not exit at end of input")
			}
		})
		return p.Conn
	}},
}

// The configuration most tests use: scope "team", entry "jobs" with two
// jobs, its webhook opened by connection "hook".
const (
	scope     = "team"
	entryID   = "jobs"
	hookToken = "s3cret-token"
)

var entryConfig = json.RawMessage(`{"timezone": "Europe/Paris", "jobs": [
	{"name": "nightly", "schedule": "0 30 2 * * *"},
	{"name": "tick", "schedule": "@every 5m", "timezone": "UTC"}
]}`)

func configureParams(entries ...protocol.ConfigEntry) protocol.ConfigureParams {
	return protocol.ConfigureParams{Entries: entries,
		Connections: []protocol.Connection{{Name: "hook", Type: schedule.ConnectionWebhook, SecretNames: []string{schedule.SecretToken}}}}
}

func jobsEntry(scopeID string) protocol.ConfigEntry {
	return protocol.ConfigEntry{ScopeID: scopeID, ID: entryID, Type: schedule.Name, Config: entryConfig, Connection: "hook"}
}

// started initializes and configures the extension in mode m.
func started(t *testing.T, m mode, params protocol.ConfigureParams) (sdk.Caller, *sdktest.Host) {
	t.Helper()
	h := sdktest.New()
	h.SetSecrets("hook", map[string]string{schedule.SecretToken: hookToken})
	c := m.start(t, h)
	ctx := testContext(t)
	require.NoError(t, c.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1},
		Host: protocol.HostInfo{Name: "open-conduit", Version: "test"}, StateDir: t.TempDir()}, nil))
	require.NoError(t, c.Call(ctx, "configure", params, nil))
	return c, h
}

// hosting is how the real host runs schedule: attached in process (no
// JSON) or as a supervised process speaking the protocol.
type hosting struct {
	name  string
	start func(t *testing.T, st runtime.Store, secrets host.SecretResolver, params protocol.ConfigureParams) host.Conn
}

func manifest(t *testing.T) *protocol.Manifest {
	t.Helper()
	m, err := protocol.LoadManifest(".")
	require.NoError(t, err)
	return m
}

var hostings = []hosting{
	{"in_process", func(t *testing.T, st runtime.Store, secrets host.SecretResolver, params protocol.ConfigureParams) host.Conn {
		svc := host.NewService(host.ServiceConfig{Manifest: manifest(t), Store: st, Secrets: secrets})
		ext, err := sdk.Attach(schedule.Extension(), svc)
		require.NoError(t, err)
		att, err := host.Attach(testContext(t), ext, svc, t.TempDir(), params)
		require.NoError(t, err)
		return att
	}},
	{"process", func(t *testing.T, st runtime.Store, secrets host.SecretResolver, params protocol.ConfigureParams) host.Conn {
		abs, err := filepath.Abs(".")
		require.NoError(t, err)
		m := manifest(t)
		exe, err := os.Executable()
		require.NoError(t, err)
		p, err := host.NewProcess(host.Config{
			Package:    host.Package{Name: m.Name, Dir: abs, Manifest: m},
			StateRoot:  t.TempDir(),
			Executable: exe, // this test binary serves extension-run schedule
			Service:    host.NewService(host.ServiceConfig{Manifest: m, Store: st, Secrets: secrets}),
			Store:      st,
			Configure:  func() protocol.ConfigureParams { return params },
		})
		require.NoError(t, err)
		t.Cleanup(func() { p.Close(context.Background()) })
		require.NoError(t, p.Start(testContext(t)))
		return p
	}},
}

func openStore(t *testing.T) runtime.Store {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// secretsOf resolves connection "hook" to hookToken.
type secretsOf map[string]map[string]string

func (s secretsOf) ResolveSecrets(ctx context.Context, connection string, names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		out[n] = s[connection][n]
	}
	return out, nil
}

var hookSecrets = secretsOf{"hook": {schedule.SecretToken: hookToken}}
