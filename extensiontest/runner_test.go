package extensiontest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/extensions/runner"
	et "github.com/open-conduit/open-conduit/extensiontest"
)

// TestRunner drives extensions/runner through the harness: notes makes
// the Work, a binding runs it on the runner, a job that exits 0 ends the
// Work done and one that exits 3 on every attempt ends it failed; a
// binding config the runner refuses is a diagnostic at its path.
func TestRunner(t *testing.T) {
	t.Parallel()
	notesDir := t.TempDir()
	bindRunner := func(command string) func(*et.Config) {
		return func(c *et.Config) {
			sc := c.Scope(et.Scope)
			sc.Entry(notes.Name).Config = map[string]any{"dir": notesDir}
			sc.Bindings = append(sc.Bindings[:1], et.BindingConfig{Name: "jobs", Executor: runner.Name,
				ExecutorConfig: map[string]any{"command": command}})
			sc.Routes = []et.RouteConfig{{ID: "notes", Handler: notes.Name, Kind: notes.WorkKind, Binding: "jobs"}}
		}
	}
	put := func(id, title string) func(context.Context, *et.H) error {
		return func(context.Context, *et.H) error {
			return notes.Store{Dir: notesDir}.Put(notes.Record{ID: id, Rev: "1", Title: title})
		}
	}
	source := notes.SourceName(et.Scope, notes.Name)
	et.Test(t, et.Case{
		Package: "../extensions/runner",
		Also:    []string{"../extensions/notes"},
		Config:  bindRunner("exit 0"),
		Steps: []et.Step{
			{
				Name:      "a job that exits 0 ends its work done",
				Do:        put("n1", "Exits zero"),
				Reconcile: source,
				Expect: []et.Check{
					et.ExpectWork(et.WorkMatch{Title: "Exits zero", State: client.WorkDone}),
				},
			},
			{
				Name:        "a job that exits 3 fails its first attempt",
				Description: "the work waits out its retry backoff on the test clock",
				Config:      bindRunner("exit 3"),
				Do:          put("n2", "Exits three"),
				Reconcile:   source,
				Expect:      []et.Check{failedAttempts("Exits three", 1), et.ExpectWork(et.WorkMatch{Title: "Exits three", State: client.WorkPending})},
			},
			{
				Name:    "past the backoff the second attempt fails",
				Advance: time.Hour,
				Expect:  []et.Check{failedAttempts("Exits three", 2)},
			},
			{
				Name:    "the third and last attempt fails and the work ends failed",
				Advance: time.Hour,
				Expect: []et.Check{
					failedAttempts("Exits three", 3),
					et.ExpectWork(et.WorkMatch{Title: "Exits three", State: client.WorkFailed}),
					et.ExpectWork(et.WorkMatch{Title: "Exits zero", State: client.WorkDone}),
				},
			},
			{
				Name:   "the agent warns of its empty script until it has one",
				Expect: []et.Check{et.ExpectConfigWarning("$.scopes[0].bindings[0].executor_config", "the script is empty")},
			},
			{
				Name:   "a script silences the warning",
				Agent:  []et.AgentStep{{Fail: "never runs: no route is bound to the agent"}},
				Expect: []et.Check{et.ExpectNoConfigWarning()},
			},
			{
				Name:    "a script the agent refuses is a diagnostic at its path",
				Agent:   []et.AgentStep{{}},
				Refused: []client.Diagnostic{{Path: "$.scopes[0].bindings[0].executor_config", Rule: "invalid_config", Message: "exactly one of call, think and fail"}},
			},
		},
	})
}

// failedAttempts expects the Work titled title to have n failed
// Executions.
func failedAttempts(title string, n int) et.Check {
	return et.ExpectThat(fmt.Sprintf("work %q with %d failed attempts", title, n), func(ctx context.Context, h *et.H) (string, bool, error) {
		page, err := h.Client().Works(ctx, client.WorkQuery{Scope: et.Scope})
		if err != nil {
			return "", false, err
		}
		for _, w := range page.Works {
			if w.Display == nil || w.Display.Title != title {
				continue
			}
			xs, err := h.Client().Executions(ctx, w.ID)
			if err != nil {
				return "", false, err
			}
			failed := 0
			for _, x := range xs {
				if x.State == "failed" {
					failed++
				}
			}
			return fmt.Sprintf("%d attempts, %d failed", len(xs), failed), failed == n, nil
		}
		return "no such work", false, nil
	})
}
