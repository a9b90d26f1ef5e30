package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/internal/daemontest"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// TestShellRunCallsTheToolbeltThroughTheDaemon: a note routed to a binding
// of the bundled shell executor runs the binding's command in the run's
// own directory under <state>/executors/shell; the command calls the
// operation its binding grants with `open-conduit toolbelt call` and the
// Work is done. Its two streams are in the run's directory, apart.
func TestShellRunCallsTheToolbeltThroughTheDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the built binary")
	}
	bin := daemonBinary(t)
	noteDir := daemontest.TempDir(t)
	script := strings.Join([]string{
		`pwd >&2`,
		shellQuote(bin) + ` toolbelt call --request-id from-shell notes.add '{"title":"from the shell"}'`,
	}, "\n")
	doc, err := json.Marshal(map[string]any{
		"scopes": []any{map[string]any{
			"id":      "team",
			"entries": []any{map[string]any{"id": "main", "type": "notes", "config": map[string]any{"dir": noteDir}}},
			"routes":  []any{map[string]any{"handler": "notes", "kind": notes.WorkKind, "binding": "jobs"}},
			"bindings": []any{map[string]any{"name": "jobs", "executor": "shell", "executor_config": map[string]any{"command": script},
				"toolbelt": true, "operations": []string{notes.OpAdd}}},
		}},
	})
	require.NoError(t, err)
	d := daemontest.Start(t, daemontest.Options{Binary: bin, Config: doc,
		Packages: []string{"../../extensions/notes", "../../extensions/shell"}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := d.Client

	require.NoError(t, notes.Store{Dir: noteDir}.Put(notes.Record{ID: "n1", Rev: "1", Title: "Run me"}))
	_, err = c.Reconcile(ctx, notes.SourceName("team", "main"))
	require.NoError(t, err)
	ended, err := c.WaitFor(ctx, client.ChangeQuery{Scope: "team"}, func(ch client.Change) bool {
		return ch.Work != nil && (ch.Work.State == client.WorkDone || ch.Work.State == client.WorkFailed)
	})
	require.NoError(t, err)

	stdouts, err := filepath.Glob(filepath.Join(d.StateDir, "executors", "shell", "runs", "*", "stdout"))
	require.NoError(t, err)
	require.Len(t, stdouts, 1, "one run, in its directory under the executor's")
	runDir := filepath.Dir(stdouts[0])
	stderr, err := os.ReadFile(filepath.Join(runDir, "stderr"))
	require.NoError(t, err)
	require.Equal(t, client.WorkDone, ended.Work.State, "the command's stderr: %s", stderr)
	xs, err := c.Executions(ctx, ended.Work.ID)
	require.NoError(t, err)
	require.Len(t, xs, 1)
	assert.Equal(t, "succeeded", xs[0].State)

	resolved, err := filepath.EvalSymlinks(runDir)
	require.NoError(t, err)
	assert.Equal(t, resolved, strings.TrimSpace(string(stderr)), "the command ran in the run's directory, its pwd on stderr only")
	stdout, err := os.ReadFile(stdouts[0])
	require.NoError(t, err)
	var added notes.AddOutput
	require.NoError(t, json.Unmarshal(stdout, &added), "stdout holds the toolbelt's answer: %s", stdout)
	rec, found, err := notes.Store{Dir: noteDir}.Get(added.Note)
	require.NoError(t, err)
	require.True(t, found, "the granted call added its note")
	assert.Equal(t, "from the shell", rec.Title)

	// The run's two streams are its artifacts, kept in the daemon's store
	// (read once the daemon has stopped; the store is <state>/store).
	require.NoError(t, d.Stop())
	st, err := sqlite.Open(filepath.Join(d.StateDir, "store"))
	require.NoError(t, err)
	defer st.Close()
	var arts []runtime.Artifact
	require.NoError(t, st.View(ctx, func(tx runtime.ReadTx) error {
		arts, err = tx.Artifacts(ended.Work.ID)
		return err
	}))
	got := map[string]string{}
	for _, a := range arts {
		assert.Equal(t, xs[0].ID, a.ExecutionID)
		rc, err := st.OpenBlob(a.Digest)
		require.NoError(t, err)
		b, err := io.ReadAll(rc)
		rc.Close()
		require.NoError(t, err)
		got[a.Name] = string(b)
	}
	assert.Equal(t, map[string]string{"stdout": string(stdout), "stderr": string(stderr)}, got)
}

// TestShellIsCertified: `open-conduit extension certify ./extensions/shell`
// passes every criterion that applies, the executor's among them.
func TestShellIsCertified(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the built binary")
	}
	out, err := exec.Command(daemonBinary(t), "extension", "certify", "--json", "-", "../../extensions/shell").Output()
	require.NoError(t, err, "certify exits 0")
	var rep struct {
		OK       bool `json:"ok"`
		Criteria []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"criteria"`
	}
	require.NoError(t, json.Unmarshal(out, &rep), "%s", out)
	assert.True(t, rep.OK)
	passed := map[string]bool{}
	for _, r := range rep.Criteria {
		assert.Contains(t, []string{"pass", "skip"}, r.Status, r.ID)
		passed[r.ID] = r.Status == "pass"
	}
	assert.True(t, passed["executor/lifecycle"], "the executor criteria ran and passed")
	assert.True(t, passed["executor/controls"])
}

// TestShellRunOutlivesADaemonKill: the daemon is killed with SIGKILL while a
// shell run's command waits on a gate; the restarted daemon adopts the
// running attempt from its persisted metadata (the same attempt, a later
// lease epoch), and once the gate opens the command finishes and the Work
// is done, with one attempt.
func TestShellRunOutlivesADaemonKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the built binary")
	}
	bin := daemonBinary(t)
	noteDir, work := daemontest.TempDir(t), daemontest.TempDir(t)
	gate := filepath.Join(work, "gate")
	require.NoError(t, syscall.Mkfifo(gate, 0o600))
	doc, err := json.Marshal(map[string]any{
		"scopes": []any{map[string]any{
			"id":      "team",
			"entries": []any{map[string]any{"id": "main", "type": "notes", "config": map[string]any{"dir": noteDir}}},
			"routes": []any{
				map[string]any{"handler": "notes", "kind": notes.WorkKind, "binding": "jobs", "config": map[string]any{"tag": "job"}},
				map[string]any{"handler": "notes", "kind": notes.WorkKind},
			},
			"bindings": []any{map[string]any{"name": "jobs", "executor": "shell",
				"executor_config": map[string]any{"command": "cat " + shellQuote(gate) + " >/dev/null; echo adopted-and-done"}}},
		}},
	})
	require.NoError(t, err)
	d := daemontest.Start(t, daemontest.Options{Binary: bin, Config: doc,
		Packages: []string{"../../extensions/notes", "../../extensions/shell"}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	store := notes.Store{Dir: noteDir}
	source := notes.SourceName("team", "main")

	require.NoError(t, store.Put(notes.Record{ID: "n1", Rev: "1", Title: "Run me", Tags: []string{"job"}}))
	_, err = d.Client.Reconcile(ctx, source)
	require.NoError(t, err)
	running, err := d.Client.WaitFor(ctx, client.ChangeQuery{Scope: "team"}, func(ch client.Change) bool {
		return ch.Work != nil && ch.Work.State == client.WorkRunning
	})
	require.NoError(t, err)
	// The barrier (the change stream carries no execution states): a second
	// note's Work, which nothing runs, is routed in a later engine pass than
	// the one that started the run, so by its change the attempt is running
	// with its recovery metadata persisted.
	require.NoError(t, store.Put(notes.Record{ID: "n2", Rev: "1", Title: "A barrier"}))
	_, err = d.Client.Reconcile(ctx, source)
	require.NoError(t, err)
	_, err = d.Client.WaitFor(ctx, client.ChangeQuery{Scope: "team"}, func(ch client.Change) bool {
		return ch.Work != nil && ch.Work.ID != running.Work.ID && ch.Work.State == client.WorkPending
	})
	require.NoError(t, err)
	xs, err := d.Client.Executions(ctx, running.Work.ID)
	require.NoError(t, err)
	require.Len(t, xs, 1)
	require.True(t, xs[0].Recoverable, "the run persisted its recovery metadata")
	first := xs[0]

	require.NoError(t, d.Kill())
	d2 := daemontest.Start(t, daemontest.Options{Binary: bin, ConfigDir: d.ConfigDir, StateDir: d.StateDir})
	// The command is still waiting on its gate: open it.
	require.NoError(t, os.WriteFile(gate, []byte("go\n"), 0o600))
	ended, err := d2.Client.WaitFor(ctx, client.ChangeQuery{Scope: "team"}, func(ch client.Change) bool {
		return ch.Work != nil && ch.Work.ID == running.Work.ID && (ch.Work.State == client.WorkDone || ch.Work.State == client.WorkFailed)
	})
	require.NoError(t, err)
	assert.Equal(t, client.WorkDone, ended.Work.State)
	xs, err = d2.Client.Executions(ctx, running.Work.ID)
	require.NoError(t, err)
	require.Len(t, xs, 1, "adopted, not started again")
	assert.Equal(t, first.ID, xs[0].ID)
	assert.Equal(t, "succeeded", xs[0].State)
	assert.Greater(t, xs[0].Epoch, first.Epoch, "adopted under a later lease epoch")
	stdouts, err := filepath.Glob(filepath.Join(d.StateDir, "executors", "shell", "runs", "*", "stdout"))
	require.NoError(t, err)
	require.Len(t, stdouts, 1)
	out, err := os.ReadFile(stdouts[0])
	require.NoError(t, err)
	assert.Equal(t, "adopted-and-done\n", string(out))
}
