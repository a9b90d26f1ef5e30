package host_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/host/hosttest"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// manifestJSON is a manifest whose command runs the test binary in mode.
func manifestJSON(name, mode string, provides map[string]any, extra map[string]any) []byte {
	if provides == nil {
		provides = notesProvides(name)
	}
	m := map[string]any{
		"name": name, "version": "1.0.0", "command": []string{"ext", "child:" + mode},
		"protocol": []int{1}, "provides": provides,
	}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}

// writePackage writes a package directory under root whose command is a
// script inside it that runs the test binary (a link to the binary would
// leave the package, which the host refuses: command.symlink).
func writePackage(t *testing.T, root, name string, manifest []byte) string {
	t.Helper()
	dir := filepath.Join(root, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, protocol.ManifestFile), manifest, 0o644))
	exe, err := os.Executable()
	require.NoError(t, err)
	script := "#!/bin/sh\nexec '" + strings.ReplaceAll(exe, "'", `'\''`) + "' \"$@\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ext"), []byte(script), 0o755))
	return dir
}

// notesProvides declares an ingress type with one family and schema, a
// recurrence and a work kind.
func notesProvides(name string) map[string]any {
	return map[string]any{
		"extensions": []any{map[string]any{
			"type": name, "ingress": true,
			"families": []any{map[string]any{"name": name + ".note", "rederivable": true}},
		}},
		"routes":      []any{map[string]any{"handler": name}},
		"work_kinds":  []any{map[string]any{"name": name}},
		"recurrences": []any{map[string]any{"name": name + "-tick"}},
		"schemas":     []any{map[string]any{"base": name + ".note", "versions": []int{1}}},
		"connections": []any{map[string]any{"type": name + "-account"}},
	}
}

type fixture struct {
	t     *testing.T
	root  string // packages
	state string
	store runtime.Store
	clock *hosttest.Clock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return &fixture{t: t, root: t.TempDir(), state: t.TempDir(), store: st,
		clock: hosttest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
}

type procOption func(*host.Config)

// start writes and starts a package; the process is closed at cleanup.
func (f *fixture) process(name string, manifest []byte, opts ...procOption) (*host.Process, *host.Service) {
	t := f.t
	t.Helper()
	dir := writePackage(t, f.root, name, manifest)
	m, err := protocol.LoadManifest(dir)
	require.NoError(t, err)
	svc := host.NewService(host.ServiceConfig{Manifest: m, Store: f.store})
	cfg := host.Config{
		Package: host.Package{Name: name, Dir: dir, Manifest: m}, StateRoot: f.state,
		Service: svc, Store: f.store, Clock: f.clock,
		ShutdownGrace: 2 * time.Second, TermGrace: 2 * time.Second, ReapTimeout: 5 * time.Second,
		Configure: func() protocol.ConfigureParams {
			return protocol.ConfigureParams{Entries: []protocol.ConfigEntry{{ScopeID: "s1", ID: "e1", Type: name,
				Config: json.RawMessage(`{"source":"` + name + `/in","families":["` + name + `.note"]}`)}}}
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	p, err := host.NewProcess(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(context.Background()) })
	return p, svc
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func readLog(t *testing.T, state, name string) string {
	b, err := os.ReadFile(host.LogPath(state, name))
	require.NoError(t, err)
	return string(b)
}
