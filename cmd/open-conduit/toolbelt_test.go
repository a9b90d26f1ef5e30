package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/internal/daemontest"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// shellQuote quotes s as one sh word.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// readTrimmed is a file the job wrote, without its trailing newline.
func readTrimmed(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// TestRunnerRunReachesTheToolbeltItsBindingGrants: a note routed to a
// binding of the runner starts the binding's own command (its executor
// config, not the runner's default job), which calls the toolbelt with
// `open-conduit toolbelt call`: the operation the binding does not grant is
// refused as unauthorized, the granted one adds its note, the command
// exits 0 and the Work is done. After the run the token is dead, and a
// token the daemon did not issue never worked.
func TestRunnerRunReachesTheToolbeltItsBindingGrants(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the built binary")
	}
	bin := daemonBinary(t)
	noteDir, out := daemontest.TempDir(t), daemontest.TempDir(t)
	o := func(name string) string { return shellQuote(filepath.Join(out, name)) }
	script := strings.Join([]string{
		`printf '%s\n' "$` + protocol.ToolbeltEndpointEnv + `" > ` + o("endpoint"),
		`printf '%s\n' "$` + protocol.ToolbeltTokenEnv + `" > ` + o("token"),
		shellQuote(bin) + ` toolbelt call notes.publish '{"title":"not granted"}' > ` + o("refused.out") + ` 2> ` + o("refused.err"),
		`echo $? > ` + o("refused.status"),
		shellQuote(bin) + ` toolbelt call --request-id from-the-run notes.add '{"title":"from the run"}' > ` + o("granted.out") + ` 2> ` + o("granted.err"),
	}, "\n")
	d := runnerDaemon(t, bin, noteDir, map[string]any{"executor_config": map[string]any{"command": script},
		"toolbelt": true, "operations": []string{notes.OpAdd}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := d.Client

	require.NoError(t, notes.Store{Dir: noteDir}.Put(notes.Record{ID: "n1", Rev: "1", Title: "Run me"}))
	_, err := c.Reconcile(ctx, notes.SourceName("team", "main"))
	require.NoError(t, err)
	ended, err := c.WaitFor(ctx, client.ChangeQuery{Scope: "team"}, func(ch client.Change) bool {
		return ch.Work != nil && (ch.Work.State == client.WorkDone || ch.Work.State == client.WorkFailed)
	})
	require.NoError(t, err)
	require.Equal(t, client.WorkDone, ended.Work.State, "the binding's command ran and exited 0; granted.err: %s",
		func() string { b, _ := os.ReadFile(filepath.Join(out, "granted.err")); return string(b) }())
	xs, err := c.Executions(ctx, ended.Work.ID)
	require.NoError(t, err)
	require.Len(t, xs, 1)
	assert.Equal(t, "succeeded", xs[0].State)

	assert.Equal(t, "1", readTrimmed(t, filepath.Join(out, "refused.status")), "an ungranted operation is refused")
	assert.Contains(t, readTrimmed(t, filepath.Join(out, "refused.err")), "unauthorized: operation \"notes.publish\" is not granted")
	assert.Empty(t, readTrimmed(t, filepath.Join(out, "refused.out")))

	var added notes.AddOutput
	require.NoError(t, json.Unmarshal([]byte(readTrimmed(t, filepath.Join(out, "granted.out"))), &added))
	rec, found, err := notes.Store{Dir: noteDir}.Get(added.Note)
	require.NoError(t, err)
	require.True(t, found, "the granted call added its note")
	assert.Equal(t, "from the run", rec.Title)

	endpoint, token := readTrimmed(t, filepath.Join(out, "endpoint")), readTrimmed(t, filepath.Join(out, "token"))
	assert.Equal(t, protocol.ToolbeltUnixScheme+filepath.Join(d.StateDir, "toolbelt.sock"), endpoint)
	st, err := c.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, endpoint, st.Paths.Toolbelt, "status says where the toolbelt is served")
	info, err := os.Stat(filepath.Join(d.StateDir, "toolbelt.sock"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "only the operator's user reaches the endpoint")

	// The run has ended: its token is stale. A token the daemon did not
	// issue never worked: an altered MAC, or the same MAC at another epoch.
	parts := strings.Split(token, ".")
	require.Len(t, parts, 4)
	for name, tok := range map[string]string{
		"stale":         token,
		"altered MAC":   strings.Join([]string{parts[0], parts[1], parts[2], strings.Repeat("A", len(parts[3]))}, "."),
		"another epoch": strings.Join([]string{parts[0], parts[1], "2", parts[3]}, "."),
		"not a token":   "hello",
	} {
		_, err := sdk.Toolbelt{Endpoint: endpoint, Token: tok}.Call(ctx, notes.OpAdd, "", notes.AddInput{Title: "x"})
		assert.ErrorIs(t, err, protocol.ErrUnauthorized, name)
	}
}

// TestRunnerRunThatFailsEndsFailed: the binding's command exits 3 on every
// attempt; each attempt is recorded failed with its exit status and the
// Work ends failed once its attempts are spent, through the real daemon.
func TestRunnerRunThatFailsEndsFailed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the built binary")
	}
	noteDir := daemontest.TempDir(t)
	d := runnerDaemon(t, daemonBinary(t), noteDir, map[string]any{"executor_config": map[string]any{"command": "exit 3"}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := d.Client
	require.NoError(t, notes.Store{Dir: noteDir}.Put(notes.Record{ID: "n1", Rev: "1", Title: "Fail me"}))
	_, err := c.Reconcile(ctx, notes.SourceName("team", "main"))
	require.NoError(t, err)
	ended, err := c.WaitFor(ctx, client.ChangeQuery{Scope: "team"}, func(ch client.Change) bool {
		return ch.Work != nil && (ch.Work.State == client.WorkDone || ch.Work.State == client.WorkFailed)
	})
	require.NoError(t, err)
	assert.Equal(t, client.WorkFailed, ended.Work.State)
	xs, err := c.Executions(ctx, ended.Work.ID)
	require.NoError(t, err)
	require.Len(t, xs, 3, "the default retry policy's three attempts")
	for _, x := range xs {
		assert.Equal(t, "failed", x.State)
		assert.Equal(t, "exit status 3", x.Error)
	}
}

// TestToolbeltCallRefusesWithoutAToolbelt: outside a run (no endpoint or
// token in the environment) the call is refused before anything is sent;
// bad arguments are usage errors.
func TestToolbeltCallRefusesWithoutAToolbelt(t *testing.T) {
	t.Setenv(protocol.ToolbeltEndpointEnv, "")
	t.Setenv(protocol.ToolbeltTokenEnv, "")
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"notes.add", `{"title":"x"}`}, exitFail, "this process has no toolbelt"},
		{[]string{"notes.add", `{"title":`}, exitUsage, "INPUT is not JSON"},
		{[]string{}, exitUsage, "one operation and at most one input"},
		{[]string{"a", "{}", "extra"}, exitUsage, "one operation and at most one input"},
		{[]string{"--nope", "a"}, exitUsage, "flag provided but not defined"},
	} {
		var stdout, stderr strings.Builder
		assert.Equal(t, c.code, toolbeltCallCommand(c.args, &stdout, &stderr), "%v", c.args)
		assert.Contains(t, stderr.String(), c.stderr, "%v", c.args)
		assert.Empty(t, stdout.String())
	}
}

// runnerDaemon serves notes and runner on the built binary bin with one
// scope, team: a notes entry over noteDir whose notes are routed to the
// binding jobs, run by the runner with the binding's other fields.
func runnerDaemon(t *testing.T, bin, noteDir string, binding map[string]any) *daemontest.Daemon {
	t.Helper()
	jobs := map[string]any{"name": "jobs", "executor": "runner"}
	maps.Copy(jobs, binding)
	doc, err := json.Marshal(map[string]any{
		"scopes": []any{map[string]any{
			"id":       "team",
			"entries":  []any{map[string]any{"id": "main", "type": "notes", "config": map[string]any{"dir": noteDir}}},
			"routes":   []any{map[string]any{"handler": "notes", "kind": notes.WorkKind, "binding": "jobs"}},
			"bindings": []any{jobs},
		}},
	})
	require.NoError(t, err)
	return daemontest.Start(t, daemontest.Options{Binary: bin, Config: doc,
		Packages: []string{"../../extensions/notes", "../../extensions/runner"}})
}
