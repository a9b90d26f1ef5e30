package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// stuckSchedule answers the instant it is asked about, or one before it,
// for its first answers: what robfig/cron's arithmetic could do across a
// daylight-saving change.
type stuckSchedule struct {
	stuck int
	asked int
}

func (s *stuckSchedule) Next(t time.Time) time.Time {
	s.asked++
	if s.asked <= s.stuck {
		return t.Add(-time.Duration(s.asked-1) * time.Minute)
	}
	return t.Add(time.Hour)
}

// TestNextStepsPastAScheduleThatDoesNotAdvance: Next never answers an
// instant at or before the one it was given (the host would refuse it and
// retry the fire for ever); it steps past a schedule that does not
// advance, and gives up with no occurrence rather than loop.
func TestNextStepsPastAScheduleThatDoesNotAdvance(t *testing.T) {
	at := time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC)
	j := Job{Name: "x", spec: &stuckSchedule{stuck: 2}, loc: time.UTC}
	next := j.Next(at)
	assert.True(t, next.After(at), "next %s, from %s", next, at)
	never := Job{Name: "x", spec: &stuckSchedule{stuck: 100}, loc: time.UTC}
	assert.True(t, never.Next(at).IsZero(), "a schedule that never advances has no occurrence")
}
