package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extensions/schedule"
	"github.com/open-conduit/open-conduit/internal/daemontest"
)

var scheduleDir = filepath.Join("..", "..", "extensions", "schedule")

// scheduleTokenEnv holds the token of the test's schedule-webhook
// connection, read by the daemon from the reference env:<name>.
const scheduleTokenEnv = "SCHEDULE_TEST_TOKEN"

// scheduleConfig runs job tick every five minutes in scope home, each
// run on the runner appending a line to runs, and the same job in the
// disabled scope paused; home's entry opens its webhook with connection
// hook.
func scheduleConfig(runs string) []byte {
	entry := map[string]any{"id": "jobs", "type": "schedule", "connection": "hook",
		"config": map[string]any{"jobs": []any{map[string]any{"name": "tick", "schedule": "0 */5 * * * *"}}}}
	scope := func(id string, disabled bool) map[string]any {
		return map[string]any{"id": id, "disabled": disabled, "connections": []string{"hook"},
			"entries":  []any{entry},
			"routes":   []any{map[string]any{"id": "jobs", "handler": "schedule", "kind": schedule.WorkKindJob, "binding": "job"}},
			"bindings": []any{map[string]any{"name": "job", "executor": "runner", "executor_config": map[string]any{"command": "echo " + id + " >> " + shellQuote(runs)}}}}
	}
	doc, _ := json.Marshal(map[string]any{
		"connections": []any{map[string]any{"name": "hook", "type": schedule.ConnectionWebhook,
			"secret_refs": map[string]string{schedule.SecretToken: "env:" + scheduleTokenEnv}}},
		"scopes": []any{scope("home", false), scope("paused", true)},
	})
	return doc
}

// awaitJobRun waits on the change stream for scope home's tick Work to be
// idle again (standing Work waits for its next input) after its n-th
// execution, and returns it.
func awaitJobRun(ctx context.Context, t *testing.T, c *client.Client, after int64, n int) client.WorkDetail {
	t.Helper()
	var detail client.WorkDetail
	_, err := c.WaitFor(ctx, client.ChangeQuery{After: after, Scope: "home"}, func(ch client.Change) bool {
		// A change carries the Work's state, not its kind: read the rest.
		if ch.Work == nil || ch.Work.State == client.WorkPending || ch.Work.State == client.WorkRunning {
			return false
		}
		d, err := c.Work(ctx, ch.Work.ID)
		if err != nil || d.Work.Kind != schedule.WorkKindJob || len(d.Executions) < n {
			return false
		}
		detail = d
		return true
	})
	require.NoError(t, err, "job tick ran %d times", n)
	x := detail.Executions[n-1]
	require.Equal(t, "succeeded", x.State, "run %d of job tick: %s", n, x.Error)
	return detail
}

// TestScheduleJobsThroughTheDaemon drives the bundled schedule package
// end to end on the test clock: the arm task arms the job's timer, an
// advance past the occurrence fires it and the job runs as its standing
// Work on the runner; the next occurrence (re-armed inside the fire
// transaction) runs the same Work again. The disabled scope's timer stays
// armed and fires, and runs nothing. The job's webhook runs it on demand
// with the connection's token, and refuses a wrong one. The daemon's
// config validation refuses a bad schedule or zone with its path.
func TestScheduleJobsThroughTheDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the built binary")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	runs := filepath.Join(daemontest.TempDir(t), "runs")
	start := time.Date(2026, 1, 5, 8, 31, 0, 0, time.UTC)
	const token = "tick-tock-token"
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Packages: []string{scheduleDir, runnerDir},
		Config: scheduleConfig(runs), Env: []string{scheduleTokenEnv + "=" + token},
		Args: []string{"--test-clock=" + start.Format(time.RFC3339)}})
	c := d.Client
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.Stderr())
		}
	})
	require.NoError(t, d.WaitStderr("name=schedule-arm runs=1 "), "the arm task runs once at start")
	st, err := c.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "2 job timers armed, 0 kept, 0 cancelled", passOf(t, st, client.PassTask, schedule.TaskArm).LastDetail,
		"one timer in home, one in the disabled scope")

	// 08:35: the occurrence fires and the job runs.
	after := latestChange(ctx, t, c)
	_, err = c.AdvanceClock(ctx, 4*time.Minute)
	require.NoError(t, err)
	first := awaitJobRun(ctx, t, c, after, 1)
	assert.Equal(t, client.WorkWaiting, first.Work.State, "standing Work waits for the job's next run")
	assert.Equal(t, "tick", first.Work.Display.Title)
	assert.Equal(t, []string{schedule.CorrelationKey("jobs", "tick")}, first.Work.CorrelationKeys)
	assert.Equal(t, "runner", first.Executions[0].Executor)
	assert.Equal(t, "home", readTrimmed(t, runs))

	// The disabled scope's timer fired at 08:35 too, into a scope with no
	// routes: no Work there.
	fired, err := c.WaitFor(ctx, client.ChangeQuery{After: after, Scope: "paused"}, func(ch client.Change) bool {
		return ch.Kind == client.ChangeEvent && ch.Event.Family == schedule.Recurrence
	})
	require.NoError(t, err)
	assert.Equal(t, time.Date(2026, 1, 5, 8, 35, 0, 0, time.UTC), fired.Event.OccurredAt.UTC())

	// 08:40: the next occurrence, armed by the fire transaction, runs the
	// same Work again; the paused timer fires again.
	after = latestChange(ctx, t, c)
	_, err = c.AdvanceClock(ctx, 5*time.Minute)
	require.NoError(t, err)
	second := awaitJobRun(ctx, t, c, after, 2)
	assert.Equal(t, first.Work.ID, second.Work.ID, "one standing Work per job")
	_, err = c.WaitFor(ctx, client.ChangeQuery{After: after, Scope: "paused"}, func(ch client.Change) bool {
		return ch.Kind == client.ChangeEvent && ch.Event.Family == schedule.Recurrence &&
			ch.Event.OccurredAt.Equal(time.Date(2026, 1, 5, 8, 40, 0, 0, time.UTC))
	})
	require.NoError(t, err, "the disabled scope's timer stays armed")
	paused, err := c.Works(ctx, client.WorkQuery{Scope: "paused"})
	require.NoError(t, err)
	assert.Empty(t, paused.Works, "a disabled scope runs no job")
	require.NoError(t, d.WaitStderr("name=schedule-arm runs=3 "), "the arm task ran at 08:35 and 08:40")
	st, err = c.Status(ctx)
	require.NoError(t, err)
	arm := passOf(t, st, client.PassTask, schedule.TaskArm)
	assert.Equal(t, time.Date(2026, 1, 5, 8, 40, 0, 0, time.UTC), arm.LastStarted.UTC())
	assert.Equal(t, "0 job timers armed, 2 kept, 0 cancelled", arm.LastDetail, "the arm task found both timers armed: none was lost")
	assert.Zero(t, arm.Failures)

	// On demand: the job's webhook with the connection's token.
	base := "http://" + st.Paths.Webhook + schedule.WebhookPath("home", "jobs") + "/tick/"
	res, err := http.Post(base+"not-the-token", "", nil)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "%s", body)
	assert.NotContains(t, string(body), token)

	// A trigger sent with an Idempotency-Key, and sent again: one Event.
	trigger := func() map[string]any {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+token, nil)
		require.NoError(t, err)
		req.Header.Set(schedule.IdempotencyHeader, "deploy-42")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var answer map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&answer))
		require.Equal(t, http.StatusOK, res.StatusCode, "%v", answer)
		return answer
	}
	after = latestChange(ctx, t, c)
	answer := trigger()
	assert.EqualValues(t, 1, answer["accepted"])
	third := awaitJobRun(ctx, t, c, after, 3)
	assert.Equal(t, answer["events"], trigger()["events"], "sent again, the same trigger")
	assert.Equal(t, first.Work.ID, third.Work.ID)
	b, err := os.ReadFile(runs)
	require.NoError(t, err)
	assert.Equal(t, []string{"home", "home", "home"}, strings.Fields(string(b)), "three runs, all in home")
	events, err := c.Events(ctx, client.EventQuery{Scope: "home"})
	require.NoError(t, err)
	triggers := 0
	for _, ev := range events.Events {
		if ev.Family == schedule.FamilyTriggered {
			triggers++
		}
	}
	assert.Equal(t, 1, triggers, "the retried trigger was accepted once")

	// The daemon asks schedule's validate: a bad spec or zone is refused
	// with the field's path, without quoting it; an entry without jobs is
	// valid with a warning.
	bad := `{"scopes": [{"id": "home", "entries": [{"id": "jobs", "type": "schedule", "config": {"jobs": [
		{"name": "ok", "schedule": "@hourly"}, {"name": "typo", "schedule": "0 0 25 * * *"}]}},
		{"id": "zoned", "type": "schedule", "config": {"timezone": "Mars/Olympus"}}]}]}`
	checked, err := c.ValidateConfig(ctx, []byte(bad))
	require.NoError(t, err)
	assert.False(t, checked.Valid)
	got := map[string]string{}
	for _, dg := range checked.Diagnostics {
		got[dg.Path] = dg.Message
	}
	assert.Contains(t, got["$.scopes[0].entries[0]"], "jobs[1].schedule: is not a cron schedule", "%v", checked.Diagnostics)
	assert.Contains(t, got["$.scopes[0].entries[1]"], "timezone: is not an IANA time zone", "%v", checked.Diagnostics)
	assert.NotContains(t, got["$.scopes[0].entries[1]"], "Olympus")
	checked, err = c.ValidateConfig(ctx, []byte(`{"scopes": [{"id": "home", "entries": [{"id": "jobs", "type": "schedule"}]}]}`))
	require.NoError(t, err)
	assert.True(t, checked.Valid, "%v", checked.Diagnostics)
	require.Len(t, checked.Warnings, 1)
	assert.Contains(t, checked.Warnings[0].Message, "lists no jobs")
	require.NoError(t, d.Stop())
}
