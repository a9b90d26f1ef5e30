package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// lineTap records the lines the host writes to a package.
type lineTap struct {
	mu    sync.Mutex
	lines [][]byte
}

func (l *lineTap) tap(string) func(io.ReadCloser, io.WriteCloser) (io.ReadCloser, io.WriteCloser) {
	return func(r io.ReadCloser, w io.WriteCloser) (io.ReadCloser, io.WriteCloser) { return r, tapWriter{l, w} }
}

type tapWriter struct {
	l *lineTap
	w io.WriteCloser
}

func (t tapWriter) Write(p []byte) (int, error) {
	t.l.mu.Lock()
	t.l.lines = append(t.l.lines, bytes.Clone(p))
	t.l.mu.Unlock()
	return t.w.Write(p)
}

func (t tapWriter) Close() error { return t.w.Close() }

func (l *lineTap) containing(s string) [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][]byte
	for _, line := range l.lines {
		if bytes.Contains(line, []byte(s)) {
			out = append(out, line)
		}
	}
	return out
}

func installNotes(t *testing.T, cfgDir string) {
	t.Helper()
	m, err := os.ReadFile("../../extensions/notes/open-conduit-extension.json")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(cfgDir, "extensions", "notes"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, "extensions", "notes", "open-conduit-extension.json"), m, 0o644))
}

// A hot apply configures the running package again (with the generation,
// and without restarting it) and replaces the engine's routes at once; a
// refused document changes neither.
func TestHotApplyReplacesRoutesWithoutRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cfgDir := t.TempDir()
	installNotes(t, cfgDir)
	tap := &lineTap{}
	d, err := Open(ctx, Options{ConfigDir: cfgDir, StateDir: shortDir(t), Executable: openConduitBinary(t), NoAPI: true, Wire: tap.tap})
	require.NoError(t, err)
	defer d.Close(context.WithoutCancel(ctx))
	proc, _, ok := d.Package("notes")
	require.True(t, ok)
	startGen := proc.Generation()

	route := func(handler string) []byte {
		return []byte(fmt.Sprintf(`{"scopes": [{"id": "home", "entries": [{"id": "inbox", "type": "notes"}],
		  "routes": [{"id": "r", "handler": %q, "kind": "notes-review"}]}]}`, handler))
	}
	trace := func() []runtime.RouteTraceStep {
		steps, err := d.Engine().RouteTrace(ctx, "home", runtime.Event{Envelope: runtime.Envelope{Source: "notes/x", DeliveryID: "1",
			Family: "notes.note", Schema: "notes.note.v3", Payload: []byte(`{"title":"t","tags":["todo"]}`)}})
		require.NoError(t, err)
		return steps
	}
	require.Empty(t, trace(), "the empty configuration routes nothing")

	gen, ds, err := d.ApplyConfig(ctx, route("notes"))
	require.NoError(t, err)
	require.Empty(t, ds)
	assert.Equal(t, int64(1), gen.Number)
	steps := trace()
	require.Len(t, steps, 1)
	assert.Equal(t, "notes", steps[0].Handler)
	assert.Equal(t, startGen, proc.Generation(), "configured again, not restarted")
	assert.NotEmpty(t, tap.containing(`"generation":1,`), "configure carried generation 1")

	_, ds, err = d.ApplyConfig(ctx, route("missing"))
	require.NoError(t, err)
	require.NotEmpty(t, ds)
	assert.Equal(t, int64(1), d.Generation().Number)
	assert.Len(t, trace(), 1, "the refused document left the routes as they were")
	assert.Empty(t, tap.containing(`"generation":2`), "nothing was sent for it")

	gen, ds, err = d.ApplyConfig(ctx, []byte(`{"scopes": [{"id": "home"}]}`))
	require.NoError(t, err)
	require.Empty(t, ds)
	assert.Equal(t, int64(2), gen.Number)
	assert.Empty(t, trace(), "the route is gone")
	again, _, err := d.ApplyConfig(ctx, []byte(`{"scopes": [{"id": "home"}]}`))
	require.NoError(t, err)
	assert.Equal(t, gen, again, "the same document again is the same generation")
}

// Two packages that claim the same name (here: both are "alpha", from
// two directories) are refused together: the conflict check is atomic over
// the set, and Status names the conflict.
func TestConflictingPackagesAreNoneAdmitted(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	root := t.TempDir()
	var pkgs []host.Package
	for _, where := range []string{"one", "two"} {
		dir := filepath.Join(root, where, "alpha")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte(fmt.Sprintf("#!/bin/sh\nexec %q child:minimal\n", exe)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "open-conduit-extension.json"),
			[]byte(`{"name": "alpha", "version": "1", "command": ["run.sh"], "protocol": [1], "provides": {}}`), 0o644))
		m, err := protocol.LoadManifest(dir)
		require.NoError(t, err)
		pkgs = append(pkgs, host.Package{Name: m.Name, Dir: dir, Manifest: m})
	}
	d, err := Open(t.Context(), Options{ConfigDir: t.TempDir(), StateDir: shortDir(t), Packages: pkgs, NoAPI: true})
	require.NoError(t, err)
	defer d.Close(context.WithoutCancel(t.Context()))
	st := d.Status(t.Context())
	require.Len(t, st.Packages, 2)
	for _, p := range st.Packages {
		assert.Equal(t, "refused", p.State)
		assert.Contains(t, p.LastError, `name "alpha" is claimed by alpha and alpha`)
	}
	assert.True(t, st.Ready, "ready: every admitted package (none) is configured")
	_, _, ok := d.Package("alpha")
	assert.False(t, ok)
}

// A state directory too deep for a unix socket is refused with a clear
// message, not bind's "invalid argument".
func TestOpenRefusesASocketPathTooLong(t *testing.T) {
	state := filepath.Join(shortDir(t), strings.Repeat("s", 110))
	_, err := Open(t.Context(), Options{ConfigDir: t.TempDir(), StateDir: state})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "use a shorter state directory")
	_, err = os.Stat(state)
	assert.ErrorIs(t, err, os.ErrNotExist, "refused before anything was made")
}
