// Package schedule is the Open Conduit extension of scheduled jobs, on
// github.com/robfig/cron/v3. It is written with the Go SDK exactly as a
// third party would write one: it imports protocol/... and robfig/cron
// only, and runs as its own process (cmd/schedule, or the host's
// "open-conduit extension-run schedule").
//
// It owns jobs that run on a calendar:
//
//   - an extension type, schedule, whose entries list jobs, each a name, a
//     cron spec in robfig/cron's syntax (five fields, six with leading
//     seconds, or a descriptor such as @daily or @every 5m) and an
//     optional IANA time zone (the entry's timezone, else UTC); validate
//     refuses a bad spec, zone or name with the field's JSON path
//     (ParseEntry) and never quotes the value, and describes an entry one
//     line per job;
//   - a recurrence, schedule-cron: a task, schedule-arm, arms a timer per
//     job (of enabled and disabled entries alike: a disabled scope's
//     timers stay armed and fire, and with no routes there nothing runs),
//     re-arms one whose schedule or zone changed and cancels the timer of
//     a job no longer configured; the host asks recurrence.next for the
//     next occurrence inside each fire transaction, which computes it
//     from the timer and the host's clock alone;
//   - a route handler, schedule, that sends each firing to its job's
//     standing Work (kind schedule-job, one per entry and job, titled with
//     the job's name) and offers a trigger as a route trace's sample, and
//     a work kind trigger (work_kind.trigger) that starts a run from the
//     newest on-demand trigger, else the newest firing; the binding's
//     executor runs the job;
//   - a webhook for each entry that names a schedule-webhook connection:
//     POST /schedule/<scope>/<entry>/<job>/<token> triggers the job on
//     demand, the token compared in constant time with the connection's,
//     which schedule obtains through secret.resolve; requests with the
//     same Idempotency-Key are one trigger.
//
// The host refuses every call of the extension while one of its
// in-transaction calls is outstanding (reentrant_call), so the task and
// the webhook make a refused call again once it can have ended.
//
// The protocol's catalogue names target.resolve for "job:" wait targets,
// but carries no wire types for it and the SDK serves no targets surface,
// so schedule declares no targets.
package schedule
