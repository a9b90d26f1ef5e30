package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// TimerSource is the source of the Events timers fire.
const TimerSource = "core.timer"

// TimerFiredType is the type of a fired timer's Event.
const TimerFiredType = "timer.fired"

// ArmTimer arms (or re-arms) a timer. A timer of a kind with a
// Recurrence re-arms itself at each fire.
func (e *Engine) ArmTimer(ctx context.Context, t Timer) (Timer, error) {
	var out Timer
	err := e.store.Transact(ctx, func(tx Tx) error {
		var err error
		out, err = tx.ArmTimer(t)
		return err
	})
	if err == nil {
		e.Kick()
	}
	return out, err
}

// CancelTimer removes a timer; cancelled is false if none was armed.
func (e *Engine) CancelTimer(ctx context.Context, key string) (cancelled bool, err error) {
	err = e.store.Transact(ctx, func(tx Tx) error {
		cancelled, err = tx.CancelTimer(key)
		return err
	})
	return cancelled, err
}

// FireDue fires every timer due at the clock's now, each in one
// transaction that applies its effect and re-arms it (or removes it), the
// next occurrence computed inside that transaction. A recurrence error
// aborts that timer's fire, which stays due and is retried; the others
// fire. It returns how many fired.
func (e *Engine) FireDue(ctx context.Context) (int, error) {
	now := e.clock.Now()
	var due []Timer
	err := e.store.View(ctx, func(r ReadTx) error {
		var err error
		due, err = r.DueTimers(now, MaxPageLimit)
		return err
	})
	if err != nil {
		return 0, err
	}
	fired := 0
	var errs []error
	for _, t := range due {
		err := e.store.Transact(ctx, func(tx Tx) error { return e.fire(tx, t, now) })
		if err != nil {
			errs = append(errs, fmt.Errorf("timer %q: %w", t.Key, err))
			continue
		}
		fired++
	}
	return fired, errors.Join(errs...)
}

func (e *Engine) fire(tx Tx, t Timer, now time.Time) error {
	cur, err := tx.Timer(t.Key)
	if isNotFound(err) {
		return nil // cancelled since
	}
	if err != nil {
		return err
	}
	if cur.Due.After(now) {
		return nil // re-armed for later since
	}
	switch cur.Kind {
	case TimerRetry:
		_, err := tx.CancelTimer(cur.Key)
		return err
	case TimerWait:
		if _, err := tx.CancelTimer(cur.Key); err != nil {
			return err
		}
		w, err := tx.ActiveWait(cur.WorkID)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if waitTimerKey(w.ID) != cur.Key {
			return nil
		}
		return e.resolveWait(tx, w, WaitExpired)
	}
	// An occurrence: accept its Event, then re-arm or remove.
	env := Envelope{
		Source:     TimerSource,
		DeliveryID: cur.Key + "@" + cur.Due.UTC().Format(time.RFC3339Nano),
		ScopeID:    cur.ScopeID,
		Family:     cur.Kind,
		Type:       TimerFiredType,
		Payload:    cur.Payload,
		OccurredAt: cur.Due,
	}
	if cur.WorkID != "" {
		env.Works = []string{cur.WorkID}
	}
	if _, _, err := tx.AcceptEvent(env); err != nil {
		return err
	}
	rec := e.conf().Recurrences[cur.Kind]
	if rec == nil {
		_, err := tx.CancelTimer(cur.Key)
		return err
	}
	occ, err := rec.Next(cur, e.clock.Now())
	if err != nil {
		return fmt.Errorf("recurrence %q: %w", cur.Kind, err)
	}
	next := occ.Due
	if next.IsZero() {
		_, err := tx.CancelTimer(cur.Key)
		return err
	}
	if !next.After(cur.Due) {
		return fmt.Errorf("%w: recurrence %q gave %s, not after %s", ErrInvalid, cur.Kind, next, cur.Due)
	}
	cur.Due = next
	if occ.Payload != nil {
		cur.Payload = occ.Payload
	}
	_, err = tx.ArmTimer(cur)
	return err
}
