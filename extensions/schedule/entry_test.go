package schedule_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/schedule"
)

// TestParseEntryAccepts reads each spec form robfig/cron knows, in the
// entry's zone or the job's own.
func TestParseEntryAccepts(t *testing.T) {
	e, err := schedule.ParseEntry([]byte(`{"timezone": "Europe/Paris", "jobs": [
		{"name": "seconds", "schedule": "30 0 9 * * MON-FRI"},
		{"name": "minutes", "schedule": "*/15 * * * *"},
		{"name": "daily", "schedule": "@daily", "timezone": "America/New_York"},
		{"name": "every", "schedule": "@every 1h30m"},
		{"name": "leap_day", "schedule": "0 0 0 29 2 *"}
	]}`))
	require.NoError(t, err)
	assert.Equal(t, "Europe/Paris", e.Timezone)
	var zones []string
	for _, j := range e.Jobs {
		zones = append(zones, j.Name+"@"+j.Timezone)
	}
	assert.Equal(t, []string{"seconds@Europe/Paris", "minutes@Europe/Paris", "daily@America/New_York",
		"every@Europe/Paris", "leap_day@Europe/Paris"}, zones)

	empty, err := schedule.ParseEntry(nil)
	require.NoError(t, err)
	assert.Equal(t, schedule.DefaultZone, empty.Timezone, "no config: no jobs, read in UTC")
	assert.Empty(t, empty.Jobs)
	empty, err = schedule.ParseEntry([]byte(`{}`))
	require.NoError(t, err)
	assert.Empty(t, empty.Jobs)
}

// TestParseEntryRefuses refuses each bad field with its JSON path, and
// never quotes the value it refuses.
func TestParseEntryRefuses(t *testing.T) {
	many := `{"jobs": [` + strings.Repeat(`{"name": "a", "schedule": "@daily"},`, schedule.MaxJobs) + `{"name": "a", "schedule": "@daily"}]}`
	for _, tc := range []struct {
		name, config, path, value string
	}{
		{"bad spec", `{"jobs": [{"name": "a", "schedule": "@daily"}, {"name": "b", "schedule": "61 * * * * QUUX"}]}`, "jobs[1].schedule", "QUUX"},
		{"too few fields", `{"jobs": [{"name": "a", "schedule": "zzz 5"}]}`, "jobs[0].schedule", "zzz"},
		{"unknown descriptor", `{"jobs": [{"name": "a", "schedule": "@fortnightly"}]}`, "jobs[0].schedule", "fortnightly"},
		{"bad every", `{"jobs": [{"name": "a", "schedule": "@every soon"}]}`, "jobs[0].schedule", "soon"},
		{"sub-second every", `{"jobs": [{"name": "a", "schedule": "@every 500ms"}]}`, "jobs[0].schedule", "500ms"},
		{"fractional every", `{"jobs": [{"name": "a", "schedule": "@every 1500ms"}]}`, "jobs[0].schedule", "1500ms"},
		{"negative every", `{"jobs": [{"name": "a", "schedule": "@every -5m"}]}`, "jobs[0].schedule", "-5m"},
		{"never occurs", `{"jobs": [{"name": "a", "schedule": "0 0 0 30 2 *"}]}`, "jobs[0].schedule", "30 2"},
		{"zone prefix", `{"jobs": [{"name": "a", "schedule": "CRON_TZ=Asia/Tokyo 0 9 * * *"}]}`, "jobs[0].schedule", "Tokyo"},
		{"zone prefix without a space", `{"jobs": [{"name": "a", "schedule": "TZ=UTC"}]}`, "jobs[0].schedule", "TZ=UTC"},
		{"two lines", `{"jobs": [{"name": "a", "schedule": "@daily\n@hourly"}]}`, "jobs[0].schedule", "hourly"},
		{"no schedule", `{"jobs": [{"name": "a"}]}`, "jobs[0].schedule", ""},
		{"long schedule", `{"jobs": [{"name": "a", "schedule": "` + strings.Repeat("1,", 200) + `1 * * * *"}]}`, "jobs[0].schedule", "1,1,1"},
		{"bad job zone", `{"jobs": [{"name": "a", "schedule": "@daily", "timezone": "Mars/Olympus"}]}`, "jobs[0].timezone", "Olympus"},
		{"machine zone", `{"jobs": [{"name": "a", "schedule": "@daily", "timezone": "Local"}]}`, "jobs[0].timezone", "Local"},
		{"path zone", `{"jobs": [{"name": "a", "schedule": "@daily", "timezone": "../../etc/passwd"}]}`, "jobs[0].timezone", "passwd"},
		{"bad entry zone", `{"timezone": "Nowhere/Land", "jobs": []}`, "timezone", "Nowhere"},
		{"no name", `{"jobs": [{"schedule": "@daily"}]}`, "jobs[0].name", ""},
		{"bad name", `{"jobs": [{"name": "Nightly Run", "schedule": "@daily"}]}`, "jobs[0].name", "Nightly"},
		{"name with a slash", `{"jobs": [{"name": "a/b", "schedule": "@daily"}]}`, "jobs[0].name", "a/b"},
		{"duplicate name", `{"jobs": [{"name": "a", "schedule": "@daily"}, {"name": "a", "schedule": "@hourly"}]}`, "jobs[1].name", ""},
		{"unknown job field", `{"jobs": [{"name": "a", "schedule": "@daily", "command": "rm -rf"}]}`, "jobs[0].command", "rm -rf"},
		{"unknown entry field", `{"jobz": []}`, "jobz", ""},
		{"duplicate member", `{"jobs": [{"name": "a", "name": "b", "schedule": "@daily"}]}`, "jobs[0].name", ""},
		{"wrong type", `{"jobs": [{"name": 7, "schedule": "@daily"}]}`, "jobs[0].name", "7"},
		{"null job", `{"jobs": [null]}`, "jobs[0]", ""},
		{"not an object", `[1, 2]`, "", ""},
		{"too many jobs", many, "jobs", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := schedule.ParseEntry([]byte(tc.config))
			require.Error(t, err)
			var fe *schedule.FieldError
			require.True(t, errors.As(err, &fe), "%T %v", err, err)
			assert.Equal(t, tc.path, fe.Path, "%v", err)
			if tc.value != "" {
				assert.NotContains(t, fe.Problem, tc.value, "the refusal quotes the value")
			}
		})
	}
}

// TestJobNext computes occurrences in the job's zone, across daylight
// saving time, always strictly after the instant given.
func TestJobNext(t *testing.T) {
	e, err := schedule.ParseEntry([]byte(`{"jobs": [
		{"name": "paris", "schedule": "0 0 9 * * *", "timezone": "Europe/Paris"},
		{"name": "every", "schedule": "@every 5m"},
		{"name": "seconds", "schedule": "*/20 * * * * *"}
	]}`))
	require.NoError(t, err)
	paris, _ := e.Job("paris")
	winter := time.Date(2026, 1, 5, 7, 30, 0, 0, time.UTC)
	assert.Equal(t, time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC), paris.Next(winter), "09:00 CET is 08:00 UTC")
	summer := time.Date(2026, 7, 5, 7, 30, 0, 0, time.UTC)
	assert.Equal(t, time.Date(2026, 7, 6, 7, 0, 0, 0, time.UTC), paris.Next(summer), "09:00 CEST is 07:00 UTC, passed today")
	every, _ := e.Job("every")
	assert.Equal(t, winter.Add(5*time.Minute), every.Next(winter))
	seconds, _ := e.Job("seconds")
	assert.Equal(t, winter.Add(20*time.Second), seconds.Next(winter))
	_, ok := e.Job("nope")
	assert.False(t, ok)
}

// TestJobNextIsMonotonic walks a year of occurrences of schedules that
// meet daylight-saving changes in zones on both hemispheres: every next is
// strictly after the last, in UTC, and the same each time it is asked.
func TestJobNextIsMonotonic(t *testing.T) {
	e, err := schedule.ParseEntry([]byte(`{"jobs": [
		{"name": "ny-130", "schedule": "0 30 1 * * *", "timezone": "America/New_York"},
		{"name": "paris-230", "schedule": "0 30 2 * * *", "timezone": "Europe/Paris"},
		{"name": "sydney-hourly", "schedule": "0 0 * * * *", "timezone": "Australia/Sydney"},
		{"name": "lord-howe", "schedule": "0 15 2 * * *", "timezone": "Australia/Lord_Howe"}
	]}`))
	require.NoError(t, err)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, j := range e.Jobs {
		t.Run(j.Name, func(t *testing.T) {
			at, n := start, 0
			for at.Before(start.AddDate(1, 0, 0)) {
				next := j.Next(at)
				require.False(t, next.IsZero(), "no occurrence after %s", at)
				require.True(t, next.After(at), "%s is not after %s", next, at)
				require.Equal(t, time.UTC, next.Location())
				require.Equal(t, next, j.Next(at), "deterministic")
				at, n = next, n+1
			}
			assert.Greater(t, n, 360)
		})
	}
}

// BenchmarkJobNext measures recurrence.next's arithmetic on the costliest
// schedule it accepts (an occurrence four years away, 29 February) against
// a daily one, within the in-transaction bound of 250 ms by several orders
// of magnitude.
func BenchmarkJobNext(b *testing.B) {
	e, err := schedule.ParseEntry([]byte(`{"jobs": [
		{"name": "daily", "schedule": "0 0 9 * * *", "timezone": "Europe/Paris"},
		{"name": "leap-day", "schedule": "59 59 23 29 2 *", "timezone": "Europe/Paris"}
	]}`))
	require.NoError(b, err)
	from := time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, j := range e.Jobs {
		b.Run(j.Name, func(b *testing.B) {
			for b.Loop() {
				if j.Next(from).IsZero() {
					b.Fatal("no occurrence")
				}
			}
		})
	}
}
