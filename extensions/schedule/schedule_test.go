package schedule_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/schedule"
	"github.com/open-conduit/open-conduit/protocol"
)

func timerPayload(t *testing.T, job, spec, zone string) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(schedule.TimerPayload{JobRef: schedule.JobRef{ScopeID: scope, Entry: entryID, Job: job}, Schedule: spec, Timezone: zone})
	require.NoError(t, err)
	return raw
}

// TestRecurrenceNext: the next occurrence comes from the timer's payload
// and the host's now alone, after the later of the two, so a late firing
// fires once and an early one never repeats its due time; a timer that is
// not a readable job ends.
func TestRecurrenceNext(t *testing.T) {
	due := time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c, _ := started(t, m, configureParams(jobsEntry(scope)))
			ctx := testContext(t)
			for _, tc := range []struct {
				name    string
				payload json.RawMessage
				now     time.Time
				want    time.Time
			}{
				{"on time, in the job's zone", timerPayload(t, "nightly", "0 0 9 * * *", "Europe/Paris"), due,
					time.Date(2026, 1, 6, 8, 0, 0, 0, time.UTC)},
				{"late by days: once, after now", timerPayload(t, "nightly", "0 0 9 * * *", "Europe/Paris"), due.AddDate(0, 0, 3).Add(time.Hour),
					time.Date(2026, 1, 9, 8, 0, 0, 0, time.UTC)},
				{"fired early: after the due time", timerPayload(t, "tick", "@every 5m", "UTC"), due.Add(-time.Minute),
					due.Add(5 * time.Minute)},
				{"not a job", json.RawMessage(`{"job": "Not A Name", "schedule": "@daily", "timezone": "UTC"}`), due, time.Time{}},
				{"unreadable schedule", timerPayload(t, "tick", "every now and then", "UTC"), due, time.Time{}},
				{"unreadable zone", timerPayload(t, "tick", "@daily", "Mars/Olympus"), due, time.Time{}},
				{"no payload", nil, due, time.Time{}},
			} {
				var res protocol.RecurrenceNextResult
				p := protocol.RecurrenceNextParams{Recurrence: schedule.Recurrence, Now: tc.now,
					Timer: protocol.Timer{Key: "job/team/jobs/x", ScopeID: scope, Kind: schedule.Recurrence, Due: due, Payload: tc.payload}}
				require.NoError(t, c.Call(ctx, "recurrence.next", p, &res), tc.name)
				assert.True(t, tc.want.Equal(res.Next), "%s: next %s, want %s", tc.name, res.Next, tc.want)
				assert.Empty(t, res.Payload, "%s: the timer keeps its payload", tc.name)
				var again protocol.RecurrenceNextResult
				require.NoError(t, c.Call(ctx, "recurrence.next", p, &again))
				assert.True(t, res.Next.Equal(again.Next), "%s: deterministic", tc.name)
			}
		})
	}
}

func firing(payload json.RawMessage) protocol.Event {
	return protocol.Event{ID: "ev-fire", Sequence: 1, ScopeID: scope, Source: schedule.TimerSource, DeliveryID: "job/team/jobs/tick@x",
		Family: schedule.Recurrence, Type: "timer.fired", Payload: payload}
}

func triggered(t *testing.T, ref schedule.JobRef) protocol.Event {
	raw, err := json.Marshal(schedule.TriggerPayload{JobRef: ref})
	require.NoError(t, err)
	return protocol.Event{ID: "ev-trigger", Sequence: 2, ScopeID: scope, Source: schedule.SourceName(scope, ref.Entry), DeliveryID: "tick/at:1",
		Family: schedule.FamilyTriggered, Type: "triggered", Schema: schedule.TriggerSchema, Payload: raw}
}

// TestRouteMatch sends a job's firings and triggers to the job's standing
// Work, titled with its name, and nothing else: an Event of another
// family, a forged payload naming another scope, a trigger from a source
// not the entry's, a route that takes other jobs.
func TestRouteMatch(t *testing.T) {
	tick := schedule.JobRef{ScopeID: scope, Entry: entryID, Job: "tick"}
	forgedSource := triggered(t, tick)
	forgedSource.Source = "schedule/other/jobs"
	otherScope := firing(timerPayload(t, "tick", "@every 5m", "UTC"))
	otherScope.ScopeID = "elsewhere"
	notTimer := firing(timerPayload(t, "tick", "@every 5m", "UTC"))
	notTimer.Source = "notes/team/inbox"
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c, _ := started(t, m, configureParams(jobsEntry(scope)))
			ctx := testContext(t)
			for _, tc := range []struct {
				name   string
				ev     protocol.Event
				config string
				match  bool
			}{
				{"a firing", firing(timerPayload(t, "tick", "@every 5m", "UTC")), "", true},
				{"a trigger", triggered(t, tick), "", true},
				{"a route for the job", firing(timerPayload(t, "tick", "@every 5m", "UTC")), `{"entry": "jobs", "jobs": ["tick"]}`, true},
				{"a route for other jobs", firing(timerPayload(t, "tick", "@every 5m", "UTC")), `{"jobs": ["nightly"]}`, false},
				{"a route for another entry", triggered(t, tick), `{"entry": "other"}`, false},
				{"a payload naming another scope", otherScope, "", false},
				{"a firing's family from another source", notTimer, "", false},
				{"a trigger from a source not the entry's", forgedSource, "", false},
				{"another family", protocol.Event{ID: "ev-x", ScopeID: scope, Source: "notes/team/inbox", Family: "notes.note", Payload: json.RawMessage(`{}`)}, "", false},
				{"a payload that is not a job", firing(json.RawMessage(`[1]`)), "", false},
			} {
				var res protocol.RouteMatchResult
				require.NoError(t, c.Call(ctx, "route.match", protocol.RouteMatchParams{Handler: schedule.Name, ScopeID: scope,
					RouteID: "r", Config: json.RawMessage(tc.config), Event: tc.ev}, &res), tc.name)
				assert.Equal(t, tc.match, res.Match, "%s: %s", tc.name, res.Reason)
				assert.NotEmpty(t, res.Reason, tc.name)
				if tc.match {
					assert.Equal(t, schedule.WorkKindJob, res.Kind, tc.name)
					assert.Equal(t, []string{schedule.CorrelationKey(entryID, "tick")}, res.CorrelationKeys, tc.name)
					require.NotNil(t, res.Display, tc.name)
					assert.Equal(t, protocol.Display{Title: "tick"}, *res.Display, tc.name)
				}
			}
			err := c.Call(ctx, "route.match", protocol.RouteMatchParams{Handler: schedule.Name, ScopeID: scope,
				Config: json.RawMessage(`{"jobs": ["Bad Name"]}`), Event: triggered(t, tick)}, nil)
			assert.ErrorIs(t, err, protocol.ErrInvalid, "a bad route config")
		})
	}
}

// TestTrigger picks the newest on-demand trigger, else the newest firing,
// else the first input.
func TestTrigger(t *testing.T) {
	tick := schedule.JobRef{ScopeID: scope, Entry: entryID, Job: "tick"}
	fire := func(id string) protocol.Event {
		ev := firing(timerPayload(t, "tick", "@every 5m", "UTC"))
		ev.ID = id
		return ev
	}
	ask := func(id string) protocol.Event {
		ev := triggered(t, tick)
		ev.ID = id
		return ev
	}
	other := protocol.Event{ID: "other", ScopeID: scope, Source: "notes/team/inbox", Family: "notes.note"}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c, _ := started(t, m, configureParams(jobsEntry(scope)))
			ctx := testContext(t)
			for _, tc := range []struct {
				name   string
				inputs []protocol.Event
				want   string
			}{
				{"firings only: the newest", []protocol.Event{fire("f1"), fire("f2"), fire("f3")}, "f3"},
				{"a trigger among firings", []protocol.Event{fire("f1"), ask("a1"), fire("f2")}, "a1"},
				{"two triggers: the newest", []protocol.Event{ask("a1"), fire("f1"), ask("a2")}, "a2"},
				{"nothing of schedule's: the first", []protocol.Event{other}, "other"},
			} {
				var res protocol.WorkKindTriggerResult
				require.NoError(t, c.Call(ctx, "work_kind.trigger", protocol.WorkKindTriggerParams{Kind: schedule.WorkKindJob,
					Work: protocol.Work{ID: "wk", ScopeID: scope, Kind: schedule.WorkKindJob}, Inputs: tc.inputs}, &res), tc.name)
				assert.Equal(t, tc.want, res.Trigger, tc.name)
			}
		})
	}
}

// TestValidate refuses a bad entry, route or connection with the field's
// path and describes a good one a line per job.
func TestValidate(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c, _ := started(t, m, configureParams())
			ctx := testContext(t)
			var res protocol.ValidateResult
			require.NoError(t, c.Call(ctx, "validate", protocol.ValidateParams{Kind: protocol.ValidateExtension, Type: schedule.Name,
				ScopeID: scope, ID: entryID, Config: entryConfig}, &res))
			assert.Equal(t, []string{"job nightly: 0 30 2 * * * (Europe/Paris)", "job tick: @every 5m (UTC)"}, res.Describe)
			assert.Empty(t, res.Warnings)

			require.NoError(t, c.Call(ctx, "validate", protocol.ValidateParams{Kind: protocol.ValidateExtension, Type: schedule.Name,
				Config: json.RawMessage(`{}`)}, &res))
			assert.NotEmpty(t, res.Warnings, "an entry without jobs is valid, and said to arm nothing")

			for _, tc := range []struct {
				name string
				p    protocol.ValidateParams
				want string
			}{
				{"bad spec", protocol.ValidateParams{Kind: protocol.ValidateExtension, Type: schedule.Name,
					Config: json.RawMessage(`{"jobs": [{"name": "a", "schedule": "@daily"}, {"name": "b", "schedule": "every tuesday"}]}`)},
					"jobs[1].schedule: is not a cron schedule"},
				{"bad zone", protocol.ValidateParams{Kind: protocol.ValidateExtension, Type: schedule.Name,
					Config: json.RawMessage(`{"jobs": [{"name": "a", "schedule": "@daily", "timezone": "Europe/Pariss"}]}`)},
					"jobs[0].timezone: is not an IANA time zone"},
				{"bad route", protocol.ValidateParams{Kind: protocol.ValidateRoute, Type: schedule.Name,
					Config: json.RawMessage(`{"jobs": ["ok", "Not OK"]}`)}, "jobs[1]: is lower-case letters"},
				{"unknown route field", protocol.ValidateParams{Kind: protocol.ValidateRoute, Type: schedule.Name,
					Config: json.RawMessage(`{"tag": "x"}`)}, "tag: is not a field"},
				{"connection without its token", protocol.ValidateParams{Kind: protocol.ValidateConnection, Type: schedule.ConnectionWebhook},
					"needs secret_refs.token"},
				{"connection with config", protocol.ValidateParams{Kind: protocol.ValidateConnection, Type: schedule.ConnectionWebhook,
					Config: json.RawMessage(`{"url": "x"}`), SecretNames: []string{schedule.SecretToken}}, "takes no config"},
			} {
				err := c.Call(ctx, "validate", tc.p, nil)
				require.ErrorIs(t, err, protocol.ErrInvalid, tc.name)
				assert.Contains(t, err.Error(), tc.want, tc.name)
			}
			require.NoError(t, c.Call(ctx, "validate", protocol.ValidateParams{Kind: protocol.ValidateConnection, Type: schedule.ConnectionWebhook,
				SecretNames: []string{schedule.SecretToken}}, &res))
		})
	}
}

// TestConfigure registers a source for each enabled entry and a webhook
// for each that names its connection; a disabled entry registers neither,
// and a bad entry fails the generation.
func TestConfigure(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c, _ := started(t, m, configureParams())
			ctx := testContext(t)
			plain := protocol.ConfigEntry{ScopeID: "home", ID: "plain", Type: schedule.Name, Config: json.RawMessage(`{"jobs": [{"name": "a", "schedule": "@daily"}]}`)}
			params := configureParams(jobsEntry(scope), plain)
			params.Disabled = []protocol.ConfigEntry{jobsEntry("paused")}
			var res protocol.ConfigureResult
			require.NoError(t, c.Call(ctx, "configure", params, &res))
			assert.Equal(t, []protocol.SourceDecl{
				{Name: "schedule/home/plain", ScopeID: "home", Families: []string{schedule.FamilyTriggered}},
				{Name: "schedule/team/jobs", ScopeID: scope, Families: []string{schedule.FamilyTriggered}},
			}, res.Sources)
			assert.Equal(t, []string{"/schedule/team/jobs"}, res.WebhookPaths)

			bad := jobsEntry(scope)
			bad.Config = json.RawMessage(`{"jobs": [{"name": "a", "schedule": "@sometimes"}]}`)
			err := c.Call(ctx, "configure", configureParams(bad), nil)
			require.ErrorIs(t, err, protocol.ErrInvalid)
			assert.Contains(t, err.Error(), "entry team/jobs: config: jobs[0].schedule")
		})
	}
}

func hook(path string) protocol.WebhookHandleParams {
	return protocol.WebhookHandleParams{Method: http.MethodPost, Path: path, WebhookPath: schedule.WebhookPath(scope, entryID),
		ReceivedAt: time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC)}
}

// TestWebhook triggers a job with the connection's token (resolved once
// through secret.resolve), refuses a wrong token before it looks at the
// job, and yields one Event of the entry's source per trigger: the same
// one again for a repeated Idempotency-Key.
func TestWebhook(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c, h := started(t, m, configureParams(jobsEntry(scope)))
			ctx := testContext(t)
			var res protocol.WebhookHandleResult
			require.NoError(t, c.Call(ctx, "webhook.handle", hook("/schedule/team/jobs/tick/"+hookToken), &res))
			require.Len(t, res.Events, 1)
			ev := res.Events[0]
			assert.Equal(t, schedule.SourceName(scope, entryID), ev.Source)
			assert.Equal(t, schedule.FamilyTriggered, ev.Family)
			assert.Equal(t, schedule.TriggerSchema, ev.Schema)
			assert.Equal(t, scope, ev.ScopeID)
			assert.NotEmpty(t, ev.DeliveryID)
			var tp schedule.TriggerPayload
			require.NoError(t, json.Unmarshal(ev.Payload, &tp))
			assert.Equal(t, schedule.JobRef{ScopeID: scope, Entry: entryID, Job: "tick"}, tp.JobRef)

			keyed := hook("/schedule/team/jobs/nightly/" + hookToken)
			keyed.Headers = map[string][]string{schedule.IdempotencyHeader: {"deploy-42"}}
			var a, b protocol.WebhookHandleResult
			require.NoError(t, c.Call(ctx, "webhook.handle", keyed, &a))
			keyed.ReceivedAt = keyed.ReceivedAt.Add(time.Minute) // a retry, later
			require.NoError(t, c.Call(ctx, "webhook.handle", keyed, &b))
			require.Len(t, b.Events, 1)
			assert.Equal(t, a.Events[0], b.Events[0], "a retry with the same key is the same Event, to the byte")
			assert.NotEqual(t, ev.DeliveryID, a.Events[0].DeliveryID)

			for _, tc := range []struct {
				name string
				p    protocol.WebhookHandleParams
				want error
			}{
				{"wrong token", hook("/schedule/team/jobs/tick/guess"), protocol.ErrUnauthorized},
				{"wrong token, unknown job", hook("/schedule/team/jobs/nope/guess"), protocol.ErrUnauthorized},
				{"token prefix", hook("/schedule/team/jobs/tick/" + hookToken[:4]), protocol.ErrUnauthorized},
				{"unknown job", hook("/schedule/team/jobs/nope/" + hookToken), protocol.ErrNotFound},
				{"no token", hook("/schedule/team/jobs/tick"), protocol.ErrNotFound},
				{"the entry's path", hook("/schedule/team/jobs"), protocol.ErrNotFound},
				{"more segments", hook("/schedule/team/jobs/tick/" + hookToken + "/x"), protocol.ErrNotFound},
				{"an unregistered path", protocol.WebhookHandleParams{Method: http.MethodPost, Path: "/schedule/x/y/tick/" + hookToken,
					WebhookPath: "/schedule/x/y"}, protocol.ErrNotFound},
				{"a GET", func() protocol.WebhookHandleParams {
					p := hook("/schedule/team/jobs/tick/" + hookToken)
					p.Method = http.MethodGet
					return p
				}(), protocol.ErrInvalid},
				{"a bad idempotency key", func() protocol.WebhookHandleParams {
					p := hook("/schedule/team/jobs/tick/" + hookToken)
					p.Headers = map[string][]string{schedule.IdempotencyHeader: {"a key with spaces"}}
					return p
				}(), protocol.ErrInvalid},
			} {
				var res protocol.WebhookHandleResult
				err := c.Call(ctx, "webhook.handle", tc.p, &res)
				assert.ErrorIs(t, err, tc.want, tc.name)
				assert.Empty(t, res.Events, tc.name)
				if err != nil {
					assert.NotContains(t, err.Error(), hookToken, "%s: the refusal quotes the token", tc.name)
				}
			}
			resolved := 0
			for _, call := range h.Calls() {
				if call == "secret.resolve" {
					resolved++
				}
			}
			assert.Equal(t, 1, resolved, "the token is resolved once per generation")
		})
	}
}
