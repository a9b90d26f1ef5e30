package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/host/packages"
	"github.com/open-conduit/open-conduit/internal/daemontest"
)

// opsConfig is a configuration with one scope that takes notes from a
// note store directory and routes them into review Work.
func opsConfig(t *testing.T, noteDir string) []byte {
	t.Helper()
	doc, err := json.Marshal(map[string]any{
		"scopes": []any{map[string]any{
			"id": "team", "title": "Team",
			"entries": []any{map[string]any{"id": "main", "type": "notes", "config": map[string]any{"dir": noteDir}}},
			"routes":  []any{map[string]any{"handler": "notes", "kind": notes.WorkKind}},
		}},
	})
	require.NoError(t, err)
	return doc
}

// ops runs an operator command in process against the daemon's state
// directory and returns its exit status, stdout and stderr.
func ops(d *daemontest.Daemon, words ...string) (int, string, string) {
	return runWords(append(words, "--state", d.StateDir)...)
}

// opsJSON runs an operator command with --json, wants success and decodes
// its output into v.
func opsJSON(t *testing.T, d *daemontest.Daemon, v any, words ...string) {
	t.Helper()
	code, stdout, stderr := ops(d, append(words, "--json")...)
	require.Equal(t, exitOK, code, "%v: %s", words, stderr)
	require.NoError(t, json.Unmarshal([]byte(stdout), v), "%v --json prints JSON:\n%s", words, stdout)
}

// TestOperatorCommandsAgainstAServedDaemon drives the built binary's
// daemon: config validate and apply, a note reconciled into an Event that
// routing turns into Work (a waiter on the change stream wakes for it),
// and every operator command's table and --json.
func TestOperatorCommandsAgainstAServedDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the built binary")
	}
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Packages: []string{"../../extensions/notes"}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := d.Client
	noteDir := daemontest.TempDir(t)
	dir := daemontest.TempDir(t)

	// A refused config lists its problems and changes nothing.
	unknown := filepath.Join(dir, "unknown.json")
	require.NoError(t, os.WriteFile(unknown, []byte(`{"scopes":[],"extra":1}`), 0o600))
	code, stdout, stderr := ops(d, "config", "validate", unknown)
	assert.Equal(t, exitFail, code, stderr)
	assert.Contains(t, stdout, "$.extra", "a diagnostic names its JSON path")
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"scopes":[{"id":"team","routes":[{"handler":"nope","kind":"x"},{"handler":"nope-too","kind":"y"}]}]}`), 0o600))
	var invalid client.ConfigResult
	code, out, _ := ops(d, "config", "validate", bad, "--json")
	assert.Contains(t, out, "nope-too")
	assert.Equal(t, exitFail, code)
	require.NoError(t, json.Unmarshal([]byte(out), &invalid))
	assert.False(t, invalid.Valid)
	assert.GreaterOrEqual(t, len(invalid.Diagnostics), 2, "all the problems, not just the first: %+v", invalid.Diagnostics)
	code, _, stderr = ops(d, "config", "apply", bad)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "config_invalid")
	st, err := c.Status(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Generation.Number, "a refused config applies nothing")

	good := filepath.Join(dir, "good.json")
	require.NoError(t, os.WriteFile(good, opsConfig(t, noteDir), 0o600))
	var valid client.ConfigResult
	opsJSON(t, d, &valid, "config", "validate", good)
	assert.True(t, valid.Valid, "%+v", valid.Diagnostics)
	var applied client.ConfigResult
	opsJSON(t, d, &applied, "config", "apply", good)
	require.NotNil(t, applied.Generation)
	assert.Equal(t, int64(1), applied.Generation.Number)

	var view client.ConfigView
	opsJSON(t, d, &view, "config", "show")
	assert.Equal(t, int64(1), view.Generation.Number)
	assert.Contains(t, string(view.Config), `"team"`)
	code, stdout, _ = ops(d, "config", "show")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "# generation 1")

	var status client.Status
	opsJSON(t, d, &status, "status")
	assert.True(t, status.Ready)
	assert.Equal(t, filepath.Join(d.StateDir, client.SocketName), status.Paths.Socket)
	code, stdout, _ = ops(d, "status")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "generation")
	// extension list reads the install tree (--config) and the daemon's
	// state of each package.
	var pkgs []packages.Entry
	opsJSON(t, d, &pkgs, "extension", "list", "--config", d.ConfigDir)
	states := map[string]string{}
	for _, p := range pkgs {
		states[p.Name] = p.State
	}
	assert.Equal(t, "ready", states["notes"])
	code, stdout, _ = ops(d, "extension", "list", "--config", d.ConfigDir)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "NAME")
	assert.Contains(t, stdout, "notes")

	// A waiter on the change stream, from now, wakes when the note's Work
	// is created: the note is written and reconciled after it started.
	before, err := c.Events(ctx, client.EventQuery{})
	require.NoError(t, err)
	type woke struct {
		ch  client.Change
		err error
	}
	waiter := make(chan woke, 1)
	go func() {
		ch, err := c.WaitFor(ctx, client.ChangeQuery{After: before.LatestChange, Scope: "team"}, func(ch client.Change) bool {
			return ch.Kind == client.ChangeWork && ch.Work.Revision == 1
		})
		waiter <- woke{ch, err}
	}()
	require.NoError(t, notes.Store{Dir: noteDir}.Put(notes.Record{ID: "n1", Rev: "1", Title: "The first note", Tags: []string{"x"}}))
	rec, err := c.Reconcile(ctx, notes.SourceName("team", "main"))
	require.NoError(t, err)
	require.Len(t, rec.Accepted, 1)
	w := <-waiter
	require.NoError(t, w.err)
	workID := w.ch.Work.ID

	var events client.EventPage
	opsJSON(t, d, &events, "events", "--scope", "team")
	require.Len(t, events.Events, 1)
	assert.Equal(t, rec.Accepted[0].ID, events.Events[0].ID)
	code, stdout, _ = ops(d, "events")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, notes.SourceName("team", "main"))
	detail, err := c.Event(ctx, events.Events[0].ID)
	require.NoError(t, err)
	require.NotNil(t, detail.Route, "routing recorded why")
	assert.Equal(t, workID, detail.Route.WorkID)

	var works client.WorkPage
	opsJSON(t, d, &works, "work", "--scope", "team")
	require.Len(t, works.Works, 1)
	assert.Equal(t, workID, works.Works[0].ID)
	var wd client.WorkDetail
	opsJSON(t, d, &wd, "work", workID)
	require.NotNil(t, wd.Work.Display)
	assert.Equal(t, "The first note", wd.Work.Display.Title)
	code, stdout, _ = ops(d, "work", workID)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "The first note")
	code, _, stderr = ops(d, "work", "wk_missing")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "not_found")

	var cancelled client.Work
	opsJSON(t, d, &cancelled, "work", "cancel", workID, "--reason", "covered by a test")
	assert.Equal(t, client.WorkCancelled, cancelled.State)
	code, _, stderr = ops(d, "work", "cancel", workID)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "conflict", "a work that ended cannot be cancelled again")

	var waits client.WaitList
	opsJSON(t, d, &waits, "waits")
	assert.NotNil(t, waits.Waits)
	code, stdout, _ = ops(d, "waits")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "WAITING FOR")

	// A route trace answers and writes nothing: the log, the change log
	// and the Work are as they were.
	mark, err := c.Events(ctx, client.EventQuery{})
	require.NoError(t, err)
	worksBefore, err := c.Works(ctx, client.WorkQuery{})
	require.NoError(t, err)
	var trace client.TraceResult
	opsJSON(t, d, &trace, "route", "trace", "--scope", "team", "--sample", "new-note")
	require.Len(t, trace.Steps, 1)
	assert.True(t, trace.Steps[0].Match)
	assert.Equal(t, 0, trace.Chosen)
	eventFile := filepath.Join(dir, "event.json")
	require.NoError(t, os.WriteFile(eventFile, []byte(`{"source":"notes/team/main","family":"notes.note","type":"note"}`), 0o600))
	code, stdout, stderr = ops(d, "route", "trace", "--scope", "team", "--event", eventFile)
	assert.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "no route matches")
	after, err := c.Events(ctx, client.EventQuery{})
	require.NoError(t, err)
	assert.Equal(t, mark.LatestChange, after.LatestChange, "a route trace logs no change")
	assert.Len(t, after.Events, len(mark.Events), "a route trace accepts no Event")
	worksAfter, err := c.Works(ctx, client.WorkQuery{})
	require.NoError(t, err)
	assert.Equal(t, worksBefore, worksAfter, "a route trace touches no Work")

	// events --follow prints the log, then each new Event as it is
	// accepted, until interrupted.
	followCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	saved := opsContext
	opsContext = func() (context.Context, context.CancelFunc) { return followCtx, func() {} }
	defer func() { opsContext = saved }()
	pr, pw := io.Pipe()
	exited := make(chan int, 1)
	go func() {
		var stderr strings.Builder
		exited <- run([]string{"events", "--follow", "--json", "--scope", "team", "--state", d.StateDir}, pw, &stderr)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	nextEvent := func() client.Event {
		require.True(t, lines.Scan(), "events --follow ended early: %v", lines.Err())
		var e client.Event
		require.NoError(t, json.Unmarshal(lines.Bytes(), &e), "one JSON event per line: %s", lines.Text())
		return e
	}
	assert.Equal(t, rec.Accepted[0].ID, nextEvent().ID, "the log so far comes first")
	require.NoError(t, notes.Store{Dir: noteDir}.Put(notes.Record{ID: "n2", Rev: "1", Title: "The second note"}))
	rec2, err := c.Reconcile(ctx, notes.SourceName("team", "main"))
	require.NoError(t, err)
	require.Len(t, rec2.Accepted, 1)
	assert.Equal(t, rec2.Accepted[0].ID, nextEvent().ID, "then each new event as it is accepted")
	interrupt()
	go io.Copy(io.Discard, pr)
	assert.Equal(t, exitOK, <-exited, "an interrupt ends a follow cleanly")
}

// TestOperatorCommandsWithoutADaemon: every command says no daemon runs
// there, and exits 1.
func TestOperatorCommandsWithoutADaemon(t *testing.T) {
	empty := daemontest.TempDir(t)
	for _, words := range [][]string{
		{"status"}, {"events"}, {"work"}, {"work", "cancel", "wk_1"}, {"waits"}, {"config", "show"},
		{"route", "trace", "--scope", "s", "--sample", "x"},
	} {
		code, stdout, stderr := runWords(append(words, "--state", empty)...)
		assert.Equal(t, exitFail, code, words)
		assert.Empty(t, stdout, words)
		assert.Contains(t, stderr, "no daemon runs here", words)
		assert.Contains(t, stderr, filepath.Join(empty, client.SocketName), words)
	}
	// A socket nobody listens on is the same clear refusal, through client.
	sock := filepath.Join(empty, "stale.sock")
	require.NoError(t, os.WriteFile(sock, nil, 0o600))
	code, _, stderr := runWords("status", "--socket", sock)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "no daemon answers on "+sock)
}

// TestOperatorCommandUsage: bad flags and arguments are usage errors.
func TestOperatorCommandUsage(t *testing.T) {
	for _, words := range [][]string{
		{"status", "extra"}, {"events", "--limit", "0"}, {"events", "--bogus"}, {"work", "a", "b"},
		{"route", "trace", "--sample", "x"}, {"route", "trace", "--scope", "s"},
		{"route", "trace", "--scope", "s", "--sample", "x", "--event", "f"}, {"config", "apply"}, {"work", "cancel"},
	} {
		code, _, stderr := runWords(words...)
		assert.Equal(t, exitUsage, code, words)
		assert.True(t, strings.Contains(stderr, "open-conduit "), "%v: %s", words, stderr)
	}
}

// TestOperatorWorkShowsItsExecutions: a note routed to a binding run by the
// runner executor starts an attempt, and `work ID` shows it.
func TestOperatorWorkShowsItsExecutions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the built binary")
	}
	noteDir := daemontest.TempDir(t)
	d := runnerDaemon(t, daemonBinary(t), noteDir, map[string]any{"executor_config": map[string]any{"command": "echo reviewing"}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := d.Client

	scopes, err := c.Scopes(ctx)
	require.NoError(t, err)
	require.Len(t, scopes, 1)
	assert.Equal(t, "team", scopes[0].ID)

	require.NoError(t, notes.Store{Dir: noteDir}.Put(notes.Record{ID: "n1", Rev: "1", Title: "Run me"}))
	_, err = c.Reconcile(ctx, notes.SourceName("team", "main"))
	require.NoError(t, err)
	started, err := c.WaitFor(ctx, client.ChangeQuery{Scope: "team"}, func(ch client.Change) bool {
		return ch.Work != nil && ch.Work.State == client.WorkRunning
	})
	require.NoError(t, err)

	var wd client.WorkDetail
	opsJSON(t, d, &wd, "work", started.Work.ID)
	require.Len(t, wd.Executions, 1, "the attempt is listed with its work")
	x := wd.Executions[0]
	assert.Equal(t, "runner", x.Executor)
	assert.Equal(t, 1, x.Attempt)
	assert.Positive(t, x.Epoch, "an attempt runs under a lease epoch")
	xs, err := c.Executions(ctx, started.Work.ID)
	require.NoError(t, err)
	require.Len(t, xs, 1)
	assert.Equal(t, x.ID, xs[0].ID)
	code, stdout, _ := ops(d, "work", started.Work.ID)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, x.ID+" ")
	assert.Contains(t, stdout, "on runner")
}

// TestREADMEOperatorCommandsExist: every command the README's "Operate
// it" section shows is in the command table and parses its flags.
func TestREADMEOperatorCommandsExist(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, found := strings.Cut(string(b), "### Operate it")
	require.True(t, found, "README.md has no Operate it section")
	section, _, _ = strings.Cut(section, "\n## ")
	n := 0
	for line := range strings.Lines(section) {
		line, _, _ = strings.Cut(strings.TrimSpace(line), "#")
		words := strings.Fields(line)
		if len(words) < 2 || words[0] != "open-conduit" {
			continue
		}
		n++
		cmd, rest, ok := lookup(words[1:])
		require.True(t, ok, "README shows an unknown command: %s", line)
		// Run it against no daemon: a usage error (2) means the README's
		// flags or arguments are wrong; 1 (no daemon, no file) is fine.
		code := cmd.run(append(rest, "--socket", filepath.Join(t.TempDir(), "none.sock")), io.Discard, io.Discard)
		assert.NotEqual(t, exitUsage, code, "README line does not parse: %s", line)
	}
	assert.GreaterOrEqual(t, n, 10, "the section shows the operator commands")
}
