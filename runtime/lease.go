package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// RunToolbelt is how one attempt's run reaches the toolbelt: the endpoint
// it calls and the token that names the attempt there. Both are empty when
// the binding grants no toolbelt or the engine has no ToolbeltIssuer.
type RunToolbelt struct {
	Endpoint string
	Token    string
}

// ToolbeltIssuer gives an attempt its toolbelt access (Config.Toolbelt).
// The token it issues must name the execution at its epoch, so that it is
// refused once the attempt's lease moves on (Engine.AuthorityAt): a run
// recovered under a new epoch gets a new token, and the old one is dead.
type ToolbeltIssuer interface {
	Issue(executionID string, epoch int64) (RunToolbelt, error)
}

// issueToolbelt is the attempt's toolbelt access, if its binding grants
// one; an issuer's failure is the attempt's failure to start.
func (c *engineConf) issueToolbelt(b Binding, executionID string, epoch int64) (RunToolbelt, error) {
	if !b.Toolbelt || c.Toolbelt == nil {
		return RunToolbelt{}, nil
	}
	tb, err := c.Toolbelt.Issue(executionID, epoch)
	if err != nil {
		return RunToolbelt{}, fmt.Errorf("issuing the toolbelt of execution %s: %w", executionID, err)
	}
	return tb, nil
}

// renewInterval is how often an observer renews its attempt's lease: a
// third of the TTL, so a renewal that fails on a busy store is retried
// twice before the lease can lapse.
func (c *engineConf) renewInterval() time.Duration { return max(c.LeaseTTL/3, time.Millisecond) }

// keepLease renews a's lease on the engine's clock, every renewInterval,
// until the returned stop is called. A renewal that finds the lease
// superseded or released (another holder adopted the run, or it was let
// go) ends the renewing and calls lost once: the observer must stop, and
// write nothing more for the attempt. Any other failure is reported and
// retried at the next interval.
func (e *Engine) keepLease(ctx context.Context, a *attempt, lost func(error)) (stop func()) {
	every := e.conf().renewInterval()
	var (
		mu      sync.Mutex
		stopped bool
		cancel  func() bool
	)
	var arm func()
	arm = func() {
		cancel = e.clock.AfterFunc(every, func() {
			mu.Lock()
			done := stopped
			mu.Unlock()
			if done {
				return
			}
			err := e.renewLease(ctx, a)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case stopped || ctx.Err() != nil:
				return
			case errors.Is(err, ErrConflict):
				stopped = true
				lost(err)
				return
			case err != nil:
				e.report(fmt.Errorf("execution %s: renew lease: %w", a.exec.ID, err))
			}
			arm()
		})
	}
	mu.Lock()
	arm()
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		cancel()
	}
}

// renewLease extends a's lease to now+TTL, fenced by its epoch.
func (e *Engine) renewLease(ctx context.Context, a *attempt) error {
	return e.store.Transact(ctx, func(tx Tx) error {
		_, err := tx.RenewLease(a.exec.Lease, a.exec.Epoch, e.clock.Now().UTC(), e.conf().LeaseTTL)
		return err
	})
}

// errLeaseLost ends an observation whose lease another holder took.
var errLeaseLost = errors.New("the attempt's lease was lost")

// observation is one observer's hold on its attempt: the context its
// calls for the attempt run under, which ends when the lease is lost (or
// the engine closes), and the renewing of the lease.
type observation struct {
	ctx          context.Context
	cancel       context.CancelCauseFunc
	stopRenewing func()
}

// beginObservation starts renewing a's lease for a new observation.
func (e *Engine) beginObservation(a *attempt) *observation {
	ctx, cancel := context.WithCancelCause(e.observeCtx)
	o := &observation{ctx: ctx, cancel: cancel}
	o.stopRenewing = e.keepLease(ctx, a, func(err error) {
		e.report(fmt.Errorf("execution %s: %w; its observation ends: %w", a.exec.ID, errLeaseLost, err))
		cancel(errLeaseLost)
	})
	return o
}

// lost reports whether the observation ended because its lease was lost.
func (o *observation) lost() bool { return errors.Is(context.Cause(o.ctx), errLeaseLost) }

// end stops the renewing and releases the observation's context. The
// cause of a lost lease stays.
func (o *observation) end() {
	o.stopRenewing()
	o.cancel(nil)
}
