package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// TimerKey is the key of a job's timer (the host prefixes it with the
// extension's name).
func TimerKey(ref JobRef) string { return "job/" + ref.ScopeID + "/" + ref.Entry + "/" + ref.Job }

// next computes a job timer's next occurrence inside the fire
// transaction: pure, from the timer and the host's clock alone. The
// schedule and zone are the timer's payload's; the next occurrence is the
// first after the later of the due time and now, so a late firing (a
// daemon that was down, a clock moved far ahead) fires once, never a
// burst. A timer whose payload is not a readable job ends (no next
// occurrence) rather than failing every fire: the arm task arms the job
// again from its config.
func next(ctx context.Context, p protocol.RecurrenceNextParams) (protocol.RecurrenceNextResult, error) {
	var tp TimerPayload
	if err := json.Unmarshal(p.Timer.Payload, &tp); err != nil || !validJobName(tp.Job) {
		return protocol.RecurrenceNextResult{}, nil
	}
	j, err := parseJob(tp.Job, tp.Schedule, tp.Timezone)
	if err != nil {
		return protocol.RecurrenceNextResult{}, nil
	}
	from := p.Now
	if p.Timer.Due.After(from) {
		from = p.Timer.Due
	}
	return protocol.RecurrenceNextResult{Next: j.Next(from)}, nil
}

// timerPayloads is the timer every configured job should have, by key:
// the jobs of enabled and disabled entries alike (a disabled scope's
// timers stay armed and fire; with no routes there, nothing runs).
func timerPayloads(entries []entry) map[string]TimerPayload {
	want := map[string]TimerPayload{}
	for _, e := range entries {
		for _, j := range e.Entry.Jobs {
			tp := TimerPayload{JobRef: JobRef{ScopeID: e.ScopeID, Entry: e.ID, Job: j.Name}, Schedule: j.Schedule, Timezone: j.Timezone}
			want[TimerKey(tp.JobRef)] = tp
		}
	}
	return want
}

// arm makes the armed timers the configured jobs': a job without a timer,
// or whose schedule or zone changed, is armed for its next occurrence
// after the host's clock; a job whose timer is armed as configured is
// left alone, so a pass never moves an occurrence that is due; the timer
// of a job no longer configured is cancelled, found in the host's list or
// in NamespaceTimers (a timer in a scope that left the configuration is
// not listed any more). The host lists one page of timers; past it, a
// job recorded in NamespaceTimers as armed with its current schedule is
// kept. A dry run arms and cancels nothing.
func (x *extension) arm(ctx context.Context, host *sdk.Host, p protocol.TaskRunParams) (protocol.TaskRunResult, error) {
	entries, dryRun := x.snapshot()
	if dryRun {
		return protocol.TaskRunResult{Detail: "dry run: no timer armed or cancelled"}, nil
	}
	want := timerPayloads(entries)
	listed, err := retryReentrant(ctx, func() ([]protocol.Timer, error) {
		return host.Timers(ctx, protocol.TimersParams{Kind: Recurrence})
	})
	if err != nil {
		return protocol.TaskRunResult{}, fmt.Errorf("listing the timers: %w", err)
	}
	have := map[string]TimerPayload{}
	for _, t := range listed {
		var tp TimerPayload
		_ = json.Unmarshal(t.Payload, &tp) // an unreadable payload is re-armed
		have[t.Key] = tp
	}
	recorded, err := recordedTimers(ctx, host)
	if err != nil {
		return protocol.TaskRunResult{}, err
	}

	// state.timers is one page: when it is full, a timer it leaves out
	// may be armed all the same, and NamespaceTimers says as what.
	listFull := len(listed) >= protocol.MaxPageLimit

	armed, kept, cancelled := 0, 0, 0
	for _, key := range sortedKeys(want) {
		tp := want[key]
		cur, ok := have[key]
		if !ok && listFull {
			cur, ok = recorded[key]
		}
		if ok && cur == tp {
			kept++
			continue
		}
		j, err := parseJob(tp.Job, tp.Schedule, tp.Timezone)
		if err != nil {
			return protocol.TaskRunResult{}, protocol.Errorf(protocol.CodeInvalid, "job %s: %v", key, err)
		}
		due := j.Next(p.Now)
		if due.IsZero() {
			continue // parseJob refuses a schedule that never occurs
		}
		payload, err := json.Marshal(tp)
		if err != nil {
			return protocol.TaskRunResult{}, err
		}
		arm := protocol.TimerArmParams{Key: key, Recurrence: Recurrence, ScopeID: tp.ScopeID, Due: due, Payload: payload}
		if _, err := retryReentrant(ctx, func() (protocol.Timer, error) { return host.TimerArm(ctx, arm) }); err != nil {
			return protocol.TaskRunResult{}, fmt.Errorf("arming job %s: %w", key, err)
		}
		armed++
	}
	stale := map[string]bool{}
	for key := range have {
		stale[key] = true
	}
	for key := range recorded {
		stale[key] = true
	}
	for _, key := range sortedKeys(stale) {
		if _, ok := want[key]; ok {
			continue
		}
		if _, err := retryReentrant(ctx, func() (bool, error) { return host.TimerCancel(ctx, key) }); err != nil {
			return protocol.TaskRunResult{}, fmt.Errorf("cancelling the timer of %s: %w", key, err)
		}
		cancelled++
	}
	if err := recordTimers(ctx, host, recorded, want); err != nil {
		return protocol.TaskRunResult{}, err
	}
	return protocol.TaskRunResult{Detail: fmt.Sprintf("%d job timers armed, %d kept, %d cancelled", armed, kept, cancelled)}, nil
}

// recordedTimers is what NamespaceTimers holds: the payload of every
// timer the task armed, by key.
func recordedTimers(ctx context.Context, host *sdk.Host) (map[string]TimerPayload, error) {
	recorded := map[string]TimerPayload{}
	cursor := ""
	for {
		page, err := retryReentrant(ctx, func() (protocol.KVListResult, error) {
			return host.List(ctx, protocol.KVListParams{Namespace: NamespaceTimers, After: cursor})
		})
		if err != nil {
			return nil, fmt.Errorf("listing the recorded timers: %w", err)
		}
		for _, it := range page.Items {
			var tp TimerPayload
			_ = json.Unmarshal(it.Value, &tp) // an unreadable record matches no job, and is rewritten
			recorded[it.Key] = tp
		}
		if page.Next == "" || len(page.Items) == 0 {
			return recorded, nil
		}
		cursor = page.Next
	}
}

// recordTimers makes NamespaceTimers hold exactly want.
func recordTimers(ctx context.Context, host *sdk.Host, recorded, want map[string]TimerPayload) error {
	if maps.Equal(recorded, want) {
		return nil
	}
	record := recordTxn(recorded, want)
	_, err := retryReentrant(ctx, func() (protocol.KVCommitResult, error) { return host.Update(ctx, record) })
	if err != nil {
		return fmt.Errorf("recording the armed timers: %w", err)
	}
	return nil
}

// recordTxn is recordTimers' transaction.
func recordTxn(recorded, want map[string]TimerPayload) func(t *sdk.Txn) error {
	return func(t *sdk.Txn) error {
		for _, key := range sortedKeys(recorded) {
			if _, ok := want[key]; !ok {
				t.Delete(NamespaceTimers, key)
			}
		}
		for _, key := range sortedKeys(want) {
			if cur, ok := recorded[key]; !ok || cur != want[key] {
				if err := t.Put(NamespaceTimers, key, want[key]); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
