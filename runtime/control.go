package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

// Authority establishes the Authority of a running execution from the
// store: its Work's scope, its binding's connection and granted
// operations. An execution that is not running (ended, superseded) has no
// authority: ErrUnauthorized.
func (e *Engine) Authority(ctx context.Context, executionID string) (Authority, error) {
	return e.authority(ctx, executionID, 0)
}

// AuthorityAt is Authority for a caller that names the execution at an
// epoch, as a run's toolbelt token does: the token of an earlier epoch is
// refused (ErrUnauthorized) even while the execution runs under a later
// one, so a run adopted by another observer leaves its old token dead.
func (e *Engine) AuthorityAt(ctx context.Context, executionID string, epoch int64) (Authority, error) {
	if epoch <= 0 {
		return Authority{}, fmt.Errorf("%w: execution %s at epoch %d", ErrUnauthorized, executionID, epoch)
	}
	return e.authority(ctx, executionID, epoch)
}

// authority establishes an execution's Authority; epoch, when not 0, must
// be the execution's current one.
func (e *Engine) authority(ctx context.Context, executionID string, epoch int64) (Authority, error) {
	var a Authority
	err := e.store.View(ctx, func(r ReadTx) error {
		x, err := r.Execution(executionID)
		if err != nil {
			return err
		}
		if x.State != ExecutionStarting && x.State != ExecutionRunning {
			return fmt.Errorf("%w: execution %s is %s", ErrUnauthorized, executionID, x.State)
		}
		l, err := r.Lease(x.Lease)
		if err != nil {
			return err
		}
		if l.Epoch != x.Epoch || l.Released {
			return fmt.Errorf("%w: execution %s holds a superseded lease", ErrUnauthorized, executionID)
		}
		if epoch != 0 && epoch != x.Epoch {
			return fmt.Errorf("%w: execution %s runs at epoch %d, not %d", ErrUnauthorized, executionID, x.Epoch, epoch)
		}
		w, err := r.Work(x.WorkID)
		if err != nil {
			return err
		}
		b := e.conf().Bindings[w.Binding]
		a = Authority{ScopeID: w.ScopeID, WorkID: w.ID, ExecutionID: x.ID, Connection: b.Connection, Operations: slices.Clone(b.Operations)}
		return nil
	})
	return a, err
}

// CancelWork cancels a Work that has not ended: its active Wait is
// cancelled and, if an attempt runs, its executor is asked to stop it (an
// executor without Stop is left to finish; its outcome is then ignored).
func (e *Engine) CancelWork(ctx context.Context, workID string) error {
	var running *Execution
	err := e.store.Transact(ctx, func(tx Tx) error {
		w, err := tx.Work(workID)
		if err != nil {
			return err
		}
		if w.State.Terminal() {
			return nil
		}
		if wt, err := tx.ActiveWait(workID); err == nil {
			wt.State, wt.ResolvedAt = WaitCancelled, e.clock.Now().UTC()
			if _, err := tx.PutWait(wt); err != nil {
				return err
			}
			if _, err := tx.CancelTimer(waitTimerKey(wt.ID)); err != nil {
				return err
			}
		} else if !isNotFound(err) {
			return err
		}
		if _, err := tx.CancelTimer(retryTimerKey(workID)); err != nil {
			return err
		}
		if w.State == WorkRunning {
			xs, err := tx.Executions(workID)
			if err != nil {
				return err
			}
			if n := len(xs); n > 0 {
				running = &xs[n-1]
			}
		}
		w.State = WorkCancelled
		_, err = tx.PutWork(w)
		return err
	})
	if err != nil || running == nil {
		return err
	}
	if s, ok := e.executorOf(running.Executor).(Stopper); ok {
		return s.Stop(ctx, running.ID, running.Epoch)
	}
	return nil
}

func (e *Engine) executorOf(name string) Executor { return e.conf().Executors[name] }

// execution reads an execution and its executor for a control.
func (e *Engine) execution(ctx context.Context, executionID string) (Execution, Executor, error) {
	var x Execution
	err := e.store.View(ctx, func(r ReadTx) error {
		var err error
		x, err = r.Execution(executionID)
		return err
	})
	if err != nil {
		return x, nil, err
	}
	ex := e.executorOf(x.Executor)
	if ex == nil {
		return x, nil, fmt.Errorf("%w: executor %q is not configured", ErrNotFound, x.Executor)
	}
	return x, ex, nil
}

func unsupported(x Execution, control string) error {
	return fmt.Errorf("%w: executor %q has no %s", ErrUnsupported, x.Executor, control)
}

// Inject gives a running execution more input.
func (e *Engine) Inject(ctx context.Context, executionID string, input json.RawMessage) error {
	x, ex, err := e.execution(ctx, executionID)
	if err != nil {
		return err
	}
	c, ok := ex.(Injector)
	if !ok {
		return unsupported(x, "inject")
	}
	return c.Inject(ctx, executionID, input)
}

// Interrupt interrupts a running execution's current step.
func (e *Engine) Interrupt(ctx context.Context, executionID string) error {
	x, ex, err := e.execution(ctx, executionID)
	if err != nil {
		return err
	}
	c, ok := ex.(Interrupter)
	if !ok {
		return unsupported(x, "interrupt")
	}
	return c.Interrupt(ctx, executionID)
}

// Forget drops what the executor kept for an ended execution.
func (e *Engine) Forget(ctx context.Context, executionID string) error {
	x, ex, err := e.execution(ctx, executionID)
	if err != nil {
		return err
	}
	if x.State == ExecutionStarting || x.State == ExecutionRunning {
		return fmt.Errorf("%w: execution %s has not ended", ErrConflict, executionID)
	}
	c, ok := ex.(Forgetter)
	if !ok {
		return unsupported(x, "forget")
	}
	return c.Forget(ctx, executionID)
}

// Attach describes how an operator attaches to an execution.
func (e *Engine) Attach(ctx context.Context, executionID string) (json.RawMessage, error) {
	x, ex, err := e.execution(ctx, executionID)
	if err != nil {
		return nil, err
	}
	c, ok := ex.(Attacher)
	if !ok {
		return nil, unsupported(x, "attach")
	}
	return c.Attach(ctx, executionID)
}

// Live returns a running execution's output so far.
func (e *Engine) Live(ctx context.Context, executionID string, tail int) (json.RawMessage, error) {
	x, ex, err := e.execution(ctx, executionID)
	if err != nil {
		return nil, err
	}
	c, ok := ex.(Liver)
	if !ok {
		return nil, unsupported(x, "live")
	}
	return c.Live(ctx, executionID, tail)
}

// RouteSamples lists the samples the scope's routes offer for traces, as
// of the clock's now. A handler whose samples fail is left out.
func (e *Engine) RouteSamples(ctx context.Context, scopeID string) []RouteSample {
	var out []RouteSample
	now := e.clock.Now()
	c := e.conf()
	for _, route := range c.Routes[scopeID] {
		s, ok := c.Handlers[route.Handler].(RouteSampler)
		if !ok {
			continue
		}
		samples, err := s.Samples(ctx, scopeID, route, now)
		if err != nil {
			e.report(fmt.Errorf("route %s samples: %w", route.Handler, err))
			continue
		}
		out = append(out, samples...)
	}
	return out
}
