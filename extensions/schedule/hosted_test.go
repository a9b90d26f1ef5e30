package schedule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/schedule"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/runtime"
)

// storedTimers is every timer in the store, by key, as the host keeps
// them (prefixed with the extension's name).
func storedTimers(t *testing.T, st runtime.Store) map[string]runtime.Timer {
	t.Helper()
	out := map[string]runtime.Timer{}
	require.NoError(t, st.View(context.Background(), func(tx runtime.ReadTx) error {
		ts, err := tx.DueTimers(time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), runtime.MaxPageLimit)
		for _, tm := range ts {
			out[tm.Key] = tm
		}
		return err
	}))
	return out
}

func dues(timers map[string]runtime.Timer) map[string]time.Time {
	out := map[string]time.Time{}
	for k, tm := range timers {
		out[k] = tm.Due.UTC()
	}
	return out
}

const prefix = schedule.Name + ":"

// TestHostedArmTask runs the arm task under the real host on a real
// store, both ways: it arms a timer per job of enabled and disabled
// entries at the job's next occurrence; a later pass leaves a timer armed
// as configured where it is (a due occurrence is never moved); after the
// configuration changes it re-arms a changed schedule and cancels the
// timers of a removed job and of a scope that left the configuration,
// which the host no longer lists; a dry run touches nothing. The stored
// timer's next occurrence comes from recurrence.next inside the host's
// transaction.
func TestHostedArmTask(t *testing.T) {
	now := time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC)
	for _, h := range hostings {
		t.Run(h.name, func(t *testing.T) {
			ctx := testContext(t)
			st := openStore(t)
			params := configureParams(jobsEntry(scope))
			params.Disabled = []protocol.ConfigEntry{jobsEntry("paused")}
			remote := host.NewRemote(h.start(t, st, hookSecrets, params))

			detail, err := remote.RunTask(ctx, schedule.TaskArm, now)
			require.NoError(t, err)
			assert.Equal(t, "4 job timers armed, 0 kept, 0 cancelled", detail)
			nightly := time.Date(2026, 1, 6, 1, 30, 0, 0, time.UTC) // 02:30 in Paris, in winter
			want := map[string]time.Time{
				prefix + "job/team/jobs/nightly":   nightly,
				prefix + "job/team/jobs/tick":      now.Add(5 * time.Minute),
				prefix + "job/paused/jobs/nightly": nightly,
				prefix + "job/paused/jobs/tick":    now.Add(5 * time.Minute),
			}
			timers := storedTimers(t, st)
			assert.Equal(t, want, dues(timers))
			tick := timers[prefix+"job/team/jobs/tick"]
			assert.Equal(t, schedule.Recurrence, tick.Kind)
			assert.Equal(t, scope, tick.ScopeID)

			// Two minutes on: nothing moves.
			detail, err = remote.RunTask(ctx, schedule.TaskArm, now.Add(2*time.Minute))
			require.NoError(t, err)
			assert.Equal(t, "0 job timers armed, 4 kept, 0 cancelled", detail)
			assert.Equal(t, want, dues(storedTimers(t, st)), "a pass never moves an armed occurrence")

			// The fire transaction's question, through the host.
			occ, err := remote.Recurrence(schedule.Recurrence).Next(tick, tick.Due)
			require.NoError(t, err)
			assert.Equal(t, tick.Due.Add(5*time.Minute), occ.Due.UTC())

			// A new generation (a restart with a changed config): tick
			// every 10 minutes, nightly gone, scope paused gone.
			changed := jobsEntry(scope)
			changed.Config = json.RawMessage(`{"jobs": [{"name": "tick", "schedule": "@every 10m"}]}`)
			later := now.Add(3 * time.Minute)
			remote = host.NewRemote(h.start(t, st, hookSecrets, configureParams(changed)))
			detail, err = remote.RunTask(ctx, schedule.TaskArm, later)
			require.NoError(t, err)
			assert.Equal(t, "1 job timers armed, 0 kept, 3 cancelled", detail)
			assert.Equal(t, map[string]time.Time{prefix + "job/team/jobs/tick": later.Add(10 * time.Minute)}, dues(storedTimers(t, st)))

			dry := configureParams(jobsEntry(scope))
			dry.DryRun = true
			remote = host.NewRemote(h.start(t, st, hookSecrets, dry))
			detail, err = remote.RunTask(ctx, schedule.TaskArm, later)
			require.NoError(t, err)
			assert.Contains(t, detail, "dry run")
			assert.Equal(t, map[string]time.Time{prefix + "job/team/jobs/tick": later.Add(10 * time.Minute)}, dues(storedTimers(t, st)),
				"a dry run arms and cancels nothing")
		})
	}
}

// TestHostedWebhook hands a trigger to schedule through the host, which
// resolves the token from the connection's reference and checks the
// Events against the sources schedule registered; the route then sends
// the Event to the job's Work.
func TestHostedWebhook(t *testing.T) {
	for _, h := range hostings {
		t.Run(h.name, func(t *testing.T) {
			ctx := testContext(t)
			remote := host.NewRemote(h.start(t, openStore(t), hookSecrets, configureParams(jobsEntry(scope))))
			envs, err := remote.Webhook(ctx, protocol.WebhookHandleParams{Method: http.MethodPost, Path: "/schedule/team/jobs/tick/" + hookToken,
				WebhookPath: schedule.WebhookPath(scope, entryID), ReceivedAt: time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC)})
			require.NoError(t, err)
			require.Len(t, envs, 1)
			assert.Equal(t, schedule.FamilyTriggered, envs[0].Family)

			d, err := remote.RouteHandler(schedule.Name).Match(ctx, runtime.RouteInput{ScopeID: scope,
				Route: runtime.Route{Handler: schedule.Name}, Event: runtime.Event{Envelope: envs[0], Sequence: 1}})
			require.NoError(t, err)
			assert.True(t, d.Match, d.Reason)
			assert.Equal(t, []string{schedule.CorrelationKey(entryID, "tick")}, d.CorrelationKeys)

			_, err = remote.Webhook(ctx, protocol.WebhookHandleParams{Method: http.MethodPost, Path: "/schedule/team/jobs/tick/wrong",
				WebhookPath: schedule.WebhookPath(scope, entryID)})
			assert.ErrorIs(t, err, protocol.ErrUnauthorized)
		})
	}
}

// refusing is a host that answers the first refusals calls of each method
// reentrant_call, as the real host answers every call of the extension
// while one of its in-transaction calls (a job timer's recurrence.next) is
// outstanding, and then passes them on.
type refusing struct {
	host     sdk.Caller
	refusals int
	mu       sync.Mutex
	refused  map[string]int
}

func (r *refusing) Call(ctx context.Context, method string, params, result any) error {
	r.mu.Lock()
	n := r.refused[method]
	r.refused[method] = n + 1
	r.mu.Unlock()
	if n < r.refusals {
		return protocol.Errorf(protocol.CodeReentrantCall, "%s while an in-transaction call is outstanding", method)
	}
	return r.host.Call(ctx, method, params, result)
}

// TestArmRetriesReentrantRefusals: the arm task's calls refused because a
// fire's in-transaction call is outstanding are made again once it has
// ended, so the pass arms its timers rather than failing until the next
// interval; without the retries (the negative control) the same pass
// fails.
func TestArmRetriesReentrantRefusals(t *testing.T) {
	now := time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC)
	run := func(t *testing.T) (string, map[string]runtime.Timer, error) {
		st := openStore(t)
		svc := host.NewService(host.ServiceConfig{Manifest: manifest(t), Store: st, Secrets: hookSecrets})
		ext, err := sdk.Attach(schedule.Extension(), &refusing{host: svc, refusals: 2, refused: map[string]int{}})
		require.NoError(t, err)
		att, err := host.Attach(testContext(t), ext, svc, t.TempDir(), configureParams(jobsEntry(scope)))
		require.NoError(t, err)
		detail, err := host.NewRemote(att).RunTask(testContext(t), schedule.TaskArm, now)
		return detail, storedTimers(t, st), err
	}
	detail, timers, err := run(t)
	require.NoError(t, err)
	assert.Equal(t, "2 job timers armed, 0 kept, 0 cancelled", detail)
	assert.Len(t, timers, 2)

	saved := *schedule.ReentrantBackoff
	*schedule.ReentrantBackoff = nil
	t.Cleanup(func() { *schedule.ReentrantBackoff = saved })
	_, timers, err = run(t)
	assert.ErrorIs(t, err, protocol.ErrReentrantCall, "the negative control: no retries, no pass")
	assert.Empty(t, timers)
}

// TestHostedArmTaskPastOnePageOfTimers: with more job timers than the
// host lists in one page of state.timers, a second pass still keeps every
// one where it is, going by what the task recorded; without that record
// it would re-arm the unlisted ones, moving an occurrence that is due.
func TestHostedArmTaskPastOnePageOfTimers(t *testing.T) {
	if testing.Short() {
		t.Skip("arms over a thousand timers")
	}
	var jobs []string
	for i := range schedule.MaxJobs {
		jobs = append(jobs, `{"name": "j`+strconv.Itoa(i)+`", "schedule": "@every 5m"}`)
	}
	config := json.RawMessage(`{"jobs": [` + strings.Join(jobs, ",") + `]}`)
	var entries []protocol.ConfigEntry
	for _, s := range []string{"s1", "s2", "s3", "s4"} {
		entries = append(entries, protocol.ConfigEntry{ScopeID: s, ID: entryID, Type: schedule.Name, Config: config})
	}
	st := openStore(t)
	remote := host.NewRemote(hostings[0].start(t, st, hookSecrets, configureParams(entries...)))
	now := time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC)
	n := 4 * schedule.MaxJobs
	require.Greater(t, n, protocol.MaxPageLimit)
	detail, err := remote.RunTask(testContext(t), schedule.TaskArm, now)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%d job timers armed, 0 kept, 0 cancelled", n), detail)
	detail, err = remote.RunTask(testContext(t), schedule.TaskArm, now.Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("0 job timers armed, %d kept, 0 cancelled", n), detail)
	for key, due := range dues(storedTimers(t, st)) {
		require.Equal(t, now.Add(5*time.Minute), due, "%s moved", key)
	}
}
