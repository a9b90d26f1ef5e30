package runtime

import (
	"context"
	"fmt"
)

// DueLayout formats a timed Wait's default description ("until 25 Oct
// 2026 09:00 UTC").
const DueLayout = "02 Jan 2006 15:04 MST"

func waitTimerKey(waitID string) string { return TimerWait + "/" + waitID }

// DeclareWait gives a Work its Wait. A Work has at most one active Wait: a
// second is ErrConflict. The description is cut to its first line within
// MaxWaitDescription bytes, so the text never fails the Wait; a timed Wait
// without one is described by its deadline. owner is the extension that
// may set the Wait's progress ("" for none).
func (e *Engine) DeclareWait(ctx context.Context, workID, owner string, req WaitRequest) (Wait, error) {
	var w Wait
	err := e.store.Transact(ctx, func(tx Tx) error {
		var err error
		w, err = e.declareWait(tx, workID, owner, req)
		return err
	})
	return w, err
}

func (e *Engine) declareWait(tx Tx, workID, owner string, req WaitRequest) (Wait, error) {
	work, err := tx.Work(workID)
	if err != nil {
		return Wait{}, err
	}
	if work.State.Terminal() {
		return Wait{}, fmt.Errorf("%w: work %q is %s", ErrConflict, workID, work.State)
	}
	if active, err := tx.ActiveWait(workID); err == nil {
		return Wait{}, fmt.Errorf("%w: work %q already waits (%s)", ErrConflict, workID, active.ID)
	} else if !isNotFound(err) {
		return Wait{}, err
	}
	if len(req.Keys) == 0 && req.Target == "" && req.Timeout <= 0 {
		return Wait{}, fmt.Errorf("%w: a wait needs keys, a target or a timeout", ErrInvalid)
	}
	now := e.clock.Now().UTC()
	w := Wait{
		ID:          newID("wt_"),
		WorkID:      workID,
		Keys:        normaliseSet(req.Keys),
		Target:      req.Target,
		Description: ClipLine(req.Description, MaxWaitDescription),
		Owner:       owner,
		State:       WaitActive,
	}
	if req.Timeout > 0 {
		w.Deadline = now.Add(req.Timeout)
		if w.Description == "" {
			w.Description = "until " + w.Deadline.Format(DueLayout)
		}
	}
	w, err = tx.PutWait(w)
	if err != nil {
		return Wait{}, err
	}
	if req.Timeout > 0 {
		if _, err := tx.ArmTimer(Timer{Key: waitTimerKey(w.ID), ScopeID: work.ScopeID, WorkID: workID, Kind: TimerWait, Due: w.Deadline}); err != nil {
			return Wait{}, err
		}
	}
	if work.State == WorkPending {
		work.State = WorkWaiting
		if _, err := tx.PutWork(work); err != nil {
			return Wait{}, err
		}
	}
	return w, nil
}

// SetWaitProgress sets the progress line of a Work's active Wait, cut to
// one line within MaxWaitProgress bytes; "" clears it. Only the Wait's
// owner may (ErrUnauthorized); a Work without an active Wait is
// ErrNotFound.
func (e *Engine) SetWaitProgress(ctx context.Context, workID, owner, progress string) error {
	return e.store.Transact(ctx, func(tx Tx) error {
		w, err := tx.ActiveWait(workID)
		if err != nil {
			return err
		}
		if owner == "" || w.Owner != owner {
			return fmt.Errorf("%w: the active wait of work %q is not owned by %q", ErrUnauthorized, workID, owner)
		}
		return tx.SetWaitProgress(w.ID, owner, ClipLine(progress, MaxWaitProgress))
	})
}

// CancelWait cancels a Work's active Wait; a waiting Work becomes pending.
func (e *Engine) CancelWait(ctx context.Context, workID string) error {
	return e.store.Transact(ctx, func(tx Tx) error {
		w, err := tx.ActiveWait(workID)
		if err != nil {
			return err
		}
		return e.resolveWait(tx, w, WaitCancelled)
	})
}

// wake satisfies w with ev, in the routing transaction.
func (e *Engine) wake(tx Tx, w Wait, ev Event) error {
	if err := tx.LinkEventWork(ev.ID, w.WorkID); err != nil {
		return err
	}
	return e.resolveWait(tx, w, WaitSatisfied)
}

// resolveWait ends w in state and puts a waiting Work back to pending.
func (e *Engine) resolveWait(tx Tx, w Wait, state WaitState) error {
	w.State = state
	w.ResolvedAt = e.clock.Now().UTC()
	if _, err := tx.PutWait(w); err != nil {
		return err
	}
	if _, err := tx.CancelTimer(waitTimerKey(w.ID)); err != nil {
		return err
	}
	work, err := tx.Work(w.WorkID)
	if err != nil {
		return err
	}
	if work.State == WorkWaiting {
		work.State = WorkPending
		_, err = tx.PutWork(work)
	}
	return err
}
