package notes

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// DigestPayload is the payload of a digest timer: which entry it is for
// and its time of day.
type DigestPayload struct {
	ScopeID string `json:"scope_id"`
	Entry   string `json:"entry"`
	At      string `json:"at"`
}

// DigestTimerKey is the key of an entry's digest timer.
func DigestTimerKey(scopeID, entryID string) string {
	return "digest/" + scopeID + "/" + entryID
}

// parseTimeOfDay reads HH:MM.
func parseTimeOfDay(s string) (hour, minute int, err error) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, 0, fmt.Errorf("%q is not a time of day HH:MM", s)
	}
	return t.Hour(), t.Minute(), nil
}

// nextDaily is the first hour:minute UTC strictly after t.
func nextDaily(t time.Time, hour, minute int) time.Time {
	t = t.UTC()
	next := time.Date(t.Year(), t.Month(), t.Day(), hour, minute, 0, 0, time.UTC)
	if !next.After(t) {
		next = next.AddDate(0, 0, 1)
	}
	return next
}

// nextDigest computes a digest timer's next occurrence inside the fire
// transaction: pure, from the timer and the host's clock. The time of day
// is the timer's payload's, else its recurrence spec's when that is one,
// else the time of day it was due at. The next occurrence is the first
// such time after the later of the due time and now, so a late firing
// never makes a burst. A timer with no readable time of day ends (no next
// occurrence) rather than failing every fire.
func nextDigest(ctx context.Context, p protocol.RecurrenceNextParams) (protocol.RecurrenceNextResult, error) {
	var d DigestPayload
	_ = json.Unmarshal(p.Timer.Payload, &d)
	var candidates []string
	switch {
	case d.At != "":
		candidates = []string{d.At} // the entry's own time of day, or nothing
	default:
		candidates = []string{p.Timer.Recurrence}
		if !p.Timer.Due.IsZero() {
			candidates = append(candidates, p.Timer.Due.UTC().Format("15:04"))
		}
	}
	hour, minute, readable := 0, 0, false
	for _, at := range candidates {
		if h, m, err := parseTimeOfDay(at); err == nil {
			hour, minute, readable = h, m, true
			break
		}
	}
	if !readable {
		return protocol.RecurrenceNextResult{}, nil
	}
	from := p.Now
	if p.Timer.Due.After(from) {
		from = p.Timer.Due
	}
	return protocol.RecurrenceNextResult{Next: nextDaily(from, hour, minute)}, nil
}

// armDigests (re)arms each entry's digest timer for its next occurrence
// after the host's clock. Arming a key again replaces its timer, so the
// pass is idempotent. A dry run arms nothing.
func (x *extension) armDigests(ctx context.Context, host *sdk.Host, p protocol.TaskRunParams) (protocol.TaskRunResult, error) {
	entries, dryRun := x.snapshot()
	if dryRun {
		return protocol.TaskRunResult{Detail: "dry run: no digest timer armed"}, nil
	}
	armed := 0
	for _, e := range entries {
		if e.Digest == "" {
			continue
		}
		hour, minute, err := parseTimeOfDay(e.Digest)
		if err != nil {
			return protocol.TaskRunResult{}, protocol.Errorf(protocol.CodeInvalid, "entry %s/%s: %v", e.ScopeID, e.ID, err)
		}
		payload, err := json.Marshal(DigestPayload{ScopeID: e.ScopeID, Entry: e.ID, At: e.Digest})
		if err != nil {
			return protocol.TaskRunResult{}, err
		}
		if _, err := host.TimerArm(ctx, protocol.TimerArmParams{Key: DigestTimerKey(e.ScopeID, e.ID), Recurrence: Recurrence,
			ScopeID: e.ScopeID, Due: nextDaily(p.Now, hour, minute), Payload: payload}); err != nil {
			return protocol.TaskRunResult{}, fmt.Errorf("arming the digest of %s/%s: %w", e.ScopeID, e.ID, err)
		}
		armed++
	}
	return protocol.TaskRunResult{Detail: fmt.Sprintf("armed %d digest timers", armed)}, nil
}
