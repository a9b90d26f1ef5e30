package schedule_test

import (
	"errors"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extensions/schedule"
)

// FuzzParseEntry feeds entry configs, which come from an operator's file,
// to the parser: each is refused with a field error or parsed into jobs
// whose names are path segments and whose next occurrence is strictly
// later, in UTC, never a panic (robfig/cron's own TZ= prefix panics on
// "TZ=UTC" with nothing after it).
func FuzzParseEntry(f *testing.F) {
	for _, seed := range []string{
		`{"timezone": "Europe/Paris", "jobs": [{"name": "nightly", "schedule": "0 30 2 * * *"}]}`,
		`{"jobs": [{"name": "tick", "schedule": "@every 5m", "timezone": "UTC"}]}`,
		`{"jobs": [{"name": "a", "schedule": "TZ=UTC"}]}`,
		`{"jobs": [{"name": "a", "schedule": "0 0 0 30 2 *"}]}`,
		`{"jobs": [{"name": "a", "schedule": "@every 1ns"}]}`,
		`{"jobs": [{"name": "a", "name": "b", "schedule": "@daily"}]}`,
		`{"jobs": null}`,
		`not json`,
	} {
		f.Add([]byte(seed))
	}
	from := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC) // the night Europe's clocks go forward
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, err := schedule.ParseEntry(raw)
		if err != nil {
			var fe *schedule.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%q: %T %v, want a *FieldError", raw, err, err)
			}
			return
		}
		if len(e.Jobs) > schedule.MaxJobs {
			t.Fatalf("%q: %d jobs", raw, len(e.Jobs))
		}
		for _, j := range e.Jobs {
			if j.Name == "" || len(j.Name) > schedule.MaxJobNameBytes {
				t.Fatalf("%q: job name %q", raw, j.Name)
			}
			for _, r := range j.Name {
				if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
					t.Fatalf("%q: job name %q is not a path segment", raw, j.Name)
				}
			}
			next := j.Next(from)
			if next.IsZero() || !next.After(from) || next.Location() != time.UTC {
				t.Fatalf("%q: job %s: next %v after %v", raw, j.Name, next, from)
			}
		}
	})
}
