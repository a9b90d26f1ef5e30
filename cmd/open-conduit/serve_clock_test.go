package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/daemontest"
)

// clockStart is where the test clock stands when serve starts.
var clockStart = time.Date(2026, 1, 5, 8, 30, 0, 0, time.UTC)

// digestConfig is notes in scope home with its daily digest at digest.
func digestConfig(digest string) []byte {
	return []byte(`{"scopes": [{"id": "home", "entries": [{"id": "inbox", "type": "notes", "config": {"digest": "` + digest + `"}}]}]}`)
}

// passOf is the named pass of a status.
func passOf(t *testing.T, st client.Status, kind, name string) client.PassStatus {
	t.Helper()
	for _, p := range st.Passes {
		if p.Kind == kind && p.Name == name {
			return p
		}
	}
	t.Fatalf("no %s pass %s in %+v", kind, name, st.Passes)
	return client.PassStatus{}
}

// awaitDigest waits on the change stream for the digest timer's Event of
// the occurrence at due.
func awaitDigest(ctx context.Context, t *testing.T, c *client.Client, after int64, due time.Time) client.Event {
	t.Helper()
	ch, err := c.WaitFor(ctx, client.ChangeQuery{After: after, Scope: "home"}, func(ch client.Change) bool {
		return ch.Kind == client.ChangeEvent && ch.Event.Family == "notes-digest" && ch.Event.OccurredAt.Equal(due)
	})
	require.NoError(t, err, "the digest of %s fired", due)
	return *ch.Event
}

func latestChange(ctx context.Context, t *testing.T, c *client.Client) int64 {
	t.Helper()
	page, err := c.Events(ctx, client.EventQuery{Limit: 1})
	require.NoError(t, err)
	return page.LatestChange
}

// On the test clock, notes' task runs at once and then at each interval
// of the advanced clock, the digest timer it arms fires when the clock
// reaches it, and the recurrence re-arms the timer in the fire
// transaction: once the task arms nothing any more, the next day's digest
// still fires. No sleeps: the log and the change stream say when.
func TestServeTestClockDrivesTasksAndTimers(t *testing.T) {
	ctx := serveContext(t)
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Packages: []string{notesDir},
		Config: digestConfig("09:00"), Args: []string{"--test-clock=" + clockStart.Format(time.RFC3339)}})
	c := d.Client
	assert.Contains(t, d.Stdout(), "clock:    test clock at "+clockStart.Format(time.RFC3339))

	require.NoError(t, d.WaitStderr("name=notes-digest-arm runs=1 "), "the task runs once at start")
	st, err := c.Status(ctx)
	require.NoError(t, err)
	task := passOf(t, st, client.PassTask, "notes-digest-arm")
	assert.Equal(t, "notes", task.Package)
	assert.Equal(t, "1h0m0s", task.Interval)
	assert.Equal(t, int64(1), task.Runs)
	assert.Equal(t, "armed 1 digest timers", task.LastDetail)
	assert.Equal(t, clockStart, task.LastStarted, "task.run is given the daemon's clock")
	assert.Equal(t, clockStart.Add(time.Hour), task.Next)

	// 09:00: the digest fires, as an Event of the timer.
	after := latestChange(ctx, t, c)
	now, err := c.AdvanceClock(ctx, 30*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, client.ClockState{Now: clockStart.Add(30 * time.Minute), Manual: true}, now)
	nine := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	ev := awaitDigest(ctx, t, c, after, nine)
	assert.Equal(t, "core.timer", ev.Source)
	assert.Equal(t, "timer.fired", ev.Type)

	// The digest is dropped from the configuration: the task arms no
	// timer from now on.
	_, err = c.ApplyConfig(ctx, digestConfig(""))
	require.NoError(t, err)

	// 09:30: one interval after the first run, the second.
	_, err = c.AdvanceClock(ctx, 30*time.Minute)
	require.NoError(t, err)
	require.NoError(t, d.WaitStderr("name=notes-digest-arm runs=2 "), "the task runs at its interval")
	st, err = c.Status(ctx)
	require.NoError(t, err)
	task = passOf(t, st, client.PassTask, "notes-digest-arm")
	assert.Equal(t, int64(2), task.Runs)
	assert.Equal(t, clockStart.Add(time.Hour), task.LastStarted)
	assert.Equal(t, "armed 0 digest timers", task.LastDetail)
	assert.Zero(t, task.Overruns)
	assert.Zero(t, task.Failures)

	// The next day at 09:00 the digest fires again: only the fire
	// transaction's re-arm can have armed it.
	after = latestChange(ctx, t, c)
	tomorrow := nine.AddDate(0, 0, 1)
	_, err = c.SetClock(ctx, tomorrow)
	require.NoError(t, err)
	awaitDigest(ctx, t, c, after, tomorrow)
	require.NoError(t, d.Stop())
}

// Without the flag the daemon runs on the system clock and refuses to
// move it; a bad flag value is a usage error.
func TestServeSystemClockRefusesAdvance(t *testing.T) {
	ctx := serveContext(t)
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t)})
	st, err := d.Client.Clock(ctx)
	require.NoError(t, err)
	assert.False(t, st.Manual)
	_, err = d.Client.AdvanceClock(ctx, time.Minute)
	assert.ErrorIs(t, err, client.ErrConflict)
	require.NoError(t, d.Stop())

	var stdout, stderr bytes.Buffer
	assert.Equal(t, exitUsage, run([]string{"serve", "--test-clock=tomorrow"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "is not an RFC 3339 time")
}
