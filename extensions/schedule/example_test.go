package schedule_test

import (
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/extensions/schedule"
)

// An entry's jobs, read in their zones: 09:00 in Paris is 08:00 UTC in
// winter; a refusal names the field.
func ExampleParseEntry() {
	e, err := schedule.ParseEntry([]byte(`{"timezone": "Europe/Paris", "jobs": [
		{"name": "standup", "schedule": "0 0 9 * * MON-FRI"},
		{"name": "poll", "schedule": "@every 5m", "timezone": "UTC"}]}`))
	if err != nil {
		panic(err)
	}
	from := time.Date(2026, 1, 9, 12, 0, 0, 0, time.UTC) // a Friday
	for _, j := range e.Jobs {
		fmt.Println(j.Name, j.Timezone, j.Next(from).Format(time.RFC3339))
	}
	_, err = schedule.ParseEntry([]byte(`{"jobs": [{"name": "poll", "schedule": "@every now and then"}]}`))
	fmt.Println(err)
	// Output:
	// standup Europe/Paris 2026-01-12T08:00:00Z
	// poll UTC 2026-01-09T12:05:00Z
	// jobs[0].schedule: @every takes a duration such as 90s, 5m or 1h30m
}
