package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// DefaultPoolCapacity is a pool's capacity when Config.Pools names none.
const DefaultPoolCapacity = 4

func leaseName(workID string) string     { return "work/" + workID }
func retryTimerKey(workID string) string { return TimerRetry + "/" + workID }
func inputsKey(workID string) string     { return keyJoin("inputs", workID) }

func (c *engineConf) poolOf(binding string) string {
	if p := c.Bindings[binding].Pool; p != "" {
		return p
	}
	return PoolJob
}

func (e *Engine) capacity(pool string) int {
	if c, ok := e.conf().Pools[pool]; ok {
		return c
	}
	return DefaultPoolCapacity
}

// reserve takes a slot in pool, if one is free.
func (e *Engine) reserve(pool string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running[pool] >= e.capacity(pool) {
		return false
	}
	e.running[pool]++
	return true
}

func (e *Engine) release(pool string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running[pool]--
}

// Running is the number of executions this engine observes in pool.
func (e *Engine) Running(pool string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running[pool]
}

// StartPending starts pending Work on its binding's executor, within the
// capacity of the binding's pool, and returns the Executions it started.
// Work held back by a retry backoff, of an unknown binding or of a full
// pool stays pending.
//
// Each page of pending Work is read in a write transaction, which claims
// the page's first startable Work as well: the writer's cache holds what
// was just written, where a read-only snapshot starts cold after every
// write (SQLite drops a reader's cache when the log has moved), and the
// claim needs no check that the Work is still as read. The rest of the
// page is claimed one transaction each, each checking the Work's revision.
func (e *Engine) StartPending(ctx context.Context) ([]Execution, error) {
	now := e.clock.Now()
	var started []Execution
	after := ""
	for {
		c := e.conf()
		var (
			page  []Work
			first *claim
		)
		err := e.store.Transact(ctx, func(tx Tx) error {
			first = nil
			var err error
			if page, after, err = pendingPage(tx, after, now); err != nil {
				return err
			}
			for len(page) > 0 {
				w := page[0]
				page = page[1:]
				pool, ok := e.reserveFor(c, w)
				if !ok {
					continue
				}
				cl, err := e.claim(tx, c, w)
				if err != nil {
					e.release(pool)
					return err
				}
				cl.pool = pool
				first = cl
				return nil
			}
			return nil
		})
		if err != nil {
			if first != nil {
				e.release(first.pool) // claimed, but not committed
			}
			return started, err
		}
		if first != nil {
			started = append(started, e.begin(ctx, c, first))
		}
		for _, w := range page {
			c := e.conf()
			pool, ok := e.reserveFor(c, w)
			if !ok {
				continue
			}
			var cl *claim
			err := e.store.Transact(ctx, func(tx Tx) error {
				// The Work was read before this transaction: it goes
				// running only at the revision read as pending. PutWork's
				// revision check is that check (a revision names one
				// content), so the Work is not read again here.
				var err error
				cl, err = e.claim(tx, c, w)
				if errors.Is(err, ErrConflict) && cl == nil {
					return errNotStarted
				}
				return err
			})
			if err != nil {
				e.release(pool)
				if errors.Is(err, errNotStarted) {
					continue
				}
				return started, err
			}
			cl.pool = pool
			started = append(started, e.begin(ctx, c, cl))
		}
		if after == "" {
			return started, nil
		}
	}
}

// pendingPage reads a page of pending Work after the Work ID after, without
// the Work still in its retry backoff at now, and the cursor of the next
// page ("" when this one is the last).
func pendingPage(r ReadTx, after string, now time.Time) ([]Work, string, error) {
	if p, ok := r.(StartTx); ok {
		works, err := p.PendingWork(after, retryTimerKey(""), now, MaxPageLimit)
		if err != nil || len(works) < MaxPageLimit {
			return works, "", err
		}
		return works, works[len(works)-1].ID, nil
	}
	works, err := r.Works(WorkFilter{State: WorkPending, After: after, Limit: MaxPageLimit})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(works) == MaxPageLimit {
		next = works[len(works)-1].ID
	}
	kept := works[:0]
	for _, w := range works {
		t, err := r.Timer(retryTimerKey(w.ID))
		if err == nil && t.Due.After(now) {
			continue
		}
		if err != nil && !isNotFound(err) {
			return nil, "", err
		}
		kept = append(kept, w)
	}
	return kept, next, nil
}

// reserveFor takes a slot in w's pool, if w's binding is known and the
// pool has one free.
func (e *Engine) reserveFor(c *engineConf, w Work) (pool string, ok bool) {
	if _, known := c.Bindings[w.Binding]; !known {
		return "", false
	}
	pool = c.poolOf(w.Binding)
	return pool, e.reserve(pool)
}

var errNotStarted = errors.New("work changed; not started")

// StartTx is a Tx with the one-statement read and writes an Execution's
// start makes in place of the general ones: the page of startable Work,
// the Work's move to running, the run's mark. The engine finds it with a
// type assertion; a Tx without it (a wrapper's) takes the general path,
// whose outcome is the same.
type StartTx interface {
	// PendingWork pages the pending Works by ID after the Work ID after,
	// leaving out each whose timer under retryPrefix followed by its ID
	// is due after now. A page is short only at the end.
	PendingWork(after, retryPrefix string, now time.Time, limit int) ([]Work, error)
	// SetWorkState stores w in state if the stored Work is at w.Revision,
	// and returns w in state at its new revision, as PutWork of w in
	// state returns it, logging its ChangeWork as PutWork does. Only the
	// state changes: the rest of the stored Work stays as it is (w is the
	// Work as read at its revision, and a revision names one content). A
	// Work at another revision is ErrConflict, an absent one ErrNotFound;
	// either writes nothing.
	SetWorkState(w Work, state WorkState) (Work, error)
	// PriorAttempts reads, in one statement, what a start needs of the
	// attempts before it at Work workID and of the KV entry under
	// namespace and key (the engine's input cursor), as Executions and
	// KVGet would read them.
	PriorAttempts(workID, namespace, key string) (PriorAttempts, error)
	// MarkRunning sets Execution x (as its start stored it), when it is
	// starting and its lease's current, unreleased epoch is x.Epoch, to
	// running at x.Epoch, with recovery as its recovery metadata (nil
	// keeps what is stored), and returns it with marked=true. Otherwise it
	// writes nothing and returns marked=false with no error, so the
	// caller's general path finds out what the Execution is and refuses
	// as it would. Invalid recovery metadata is ErrInvalid.
	MarkRunning(x Execution, recovery []byte) (marked Execution, ok bool, err error)
}

// PriorAttempts is what StartTx.PriorAttempts reads.
type PriorAttempts struct {
	Executions   int             // how many Executions the Work has
	LastState    ExecutionState  // the last one's (by attempt, then ID); "" with none
	LastRecovery json.RawMessage // the last one's recovery metadata
	Entry        KVEntry         // the KV entry asked for, when Found
	Found        bool
}

// priorAttempts reads what claim needs of Work workID's earlier attempts:
// in one statement when tx is a StartTx, else with Executions and KVGet.
func priorAttempts(tx Tx, workID string) (PriorAttempts, error) {
	ns, key := NamespaceScheduler, inputsKey(workID)
	if s, ok := tx.(StartTx); ok {
		return s.PriorAttempts(workID, ns, key)
	}
	prev, err := tx.Executions(workID)
	if err != nil {
		return PriorAttempts{}, err
	}
	p := PriorAttempts{Executions: len(prev)}
	if len(prev) > 0 {
		p.LastState, p.LastRecovery = prev[len(prev)-1].State, prev[len(prev)-1].Recovery
	}
	p.Entry, p.Found, err = tx.KVGet(ns, key)
	return p, err
}

// attempt is one started execution as its observer holds it.
type attempt struct {
	exec     Execution
	work     Work
	binding  Binding
	executor Executor
	pool     string
}

// claim is an attempt as its start transaction wrote it: the lease, the
// Execution starting, the Work running, the inputs and trigger chosen.
type claim struct {
	x        Execution
	w        Work
	inputs   []Event
	trigger  Event
	previous json.RawMessage // the last attempt's recovery metadata
	pool     string
}

// claim writes the start of an attempt at pending Work w in tx: the start
// transaction. A Work no longer at w's revision is ErrConflict (from
// PutWork, before anything is written) with a nil claim.
func (e *Engine) claim(tx Tx, c *engineConf, w Work) (*claim, error) {
	binding := c.Bindings[w.Binding]
	w, err := setWorkState(tx, w, WorkRunning)
	if err != nil {
		return nil, err
	}
	cl := &claim{w: w}
	now := e.clock.Now().UTC()
	lease, err := tx.AcquireLease(LeaseRequest{Name: leaseName(w.ID), Holder: c.Holder, Now: now, TTL: c.LeaseTTL, Supersede: true})
	if err != nil {
		return cl, err
	}
	prior, err := priorAttempts(tx, w.ID)
	if err != nil {
		return cl, err
	}
	if prior.LastState == ExecutionSucceeded {
		cl.previous = prior.LastRecovery
	}
	var read, cursor int64
	if prior.Found {
		if _, err := kvGetJSONValue(prior.Entry, &read); err != nil {
			return cl, err
		}
	}
	cursor = read
	if cl.inputs, err = tx.WorkEvents(w.ID, cursor, MaxPageLimit); err != nil {
		return cl, err
	}
	if len(cl.inputs) > 0 {
		cl.trigger = cl.inputs[c.trigger(w.Kind, cl.inputs)]
		cursor = cl.inputs[len(cl.inputs)-1].Sequence
	}
	x := Execution{
		ID: newID("ex_"), WorkID: w.ID, Attempt: prior.Executions + 1, Executor: binding.Executor,
		Lease: lease.Name, Epoch: lease.Epoch, State: ExecutionStarting, StartedAt: now,
	}
	if cl.x, err = tx.PutExecution(x); err != nil {
		return cl, err
	}
	if cursor == read {
		return cl, nil // no new input: an absent cursor reads as 0, as it was
	}
	return cl, tx.KVCommit(KVBatch{Puts: []KVPut{kvPut(NamespaceScheduler, inputsKey(w.ID), cursor)}})
}

// setWorkState moves w, as read at its revision, to state: in one write
// when tx is a StartTx, else with PutWork.
func setWorkState(tx Tx, w Work, state WorkState) (Work, error) {
	if s, ok := tx.(StartTx); ok {
		return s.SetWorkState(w, state)
	}
	w.State = state
	return tx.PutWork(w)
}

// begin runs a committed claim: Run outside any transaction, the run
// marked running, then the observer. It owns the claim's pool slot from
// here on.
func (e *Engine) begin(ctx context.Context, c *engineConf, cl *claim) Execution {
	binding := c.Bindings[cl.w.Binding]
	executor := c.Executors[binding.Executor]
	x, w, pool := cl.x, cl.w, cl.pool
	inputs, trigger, previous := cl.inputs, cl.trigger, cl.previous
	a := &attempt{exec: x, work: w, binding: binding, executor: executor, pool: pool}
	// The attempt is observed from here on, so Drain waits for it even
	// while Run is still being called.
	e.observers.Add(1)
	toolbelt, err := c.issueToolbelt(binding, x.ID, x.Epoch)
	if err != nil {
		go func() {
			defer e.observers.Done()
			e.settle(a, RunResult{State: ExecutionFailed, Error: err.Error()})
		}()
		return x
	}
	var markedRunning atomic.Pointer[Execution]
	req := RunRequest{
		ExecutionID: x.ID, Attempt: x.Attempt, Epoch: x.Epoch, Work: w,
		Trigger: trigger, Inputs: inputs, PersistRecovery: e.startPersister(x, &markedRunning),
		Config: binding.Config, Toolbelt: toolbelt,
	}
	var handle RunHandle
	if r, ok := executor.(Resumer); ok && len(previous) > 0 {
		// Work that ran before and took new input continues its run.
		handle, err = r.Resume(ctx, req, previous)
		if errors.Is(err, ErrUnsupported) {
			// An adapter answers every optional method and refuses the
			// ones its executor does not declare: standing Work on an
			// executor without resume takes its new input in a new run.
			handle, err = executor.Run(ctx, req)
		}
	} else {
		handle, err = executor.Run(ctx, req)
	}
	if err != nil {
		go func() {
			defer e.observers.Done()
			e.settle(a, RunResult{State: ExecutionFailed, Error: "run: " + err.Error()})
		}()
		return x
	}
	if running := markedRunning.Load(); running != nil {
		// The run's recovery metadata marked it running already, in the
		// same transaction: a run that can be adopted is alive.
		x = *running
	} else if err := transactDeferSync(ctx, e.store, func(tx Tx) error {
		cur, err := markRunning(tx, x)
		if err == nil && cur != nil {
			x = *cur
		}
		return err
	}); err != nil && !errors.Is(err, ErrConflict) {
		e.report(fmt.Errorf("execution %s: mark running: %w", x.ID, err))
	}
	a.exec = x
	// Renewing starts before the call returns, so the lease is kept from
	// the moment the run is known to be alive.
	o := e.beginObservation(a)
	go func() {
		defer e.observers.Done()
		e.observe(a, handle, o)
	}()
	return x
}

// trigger asks the Work kind's policy which input triggers the attempt,
// falling back to the first.
func (c *engineConf) trigger(kind string, inputs []Event) int {
	p := c.WorkKinds[kind]
	if p == nil {
		return 0
	}
	i, err := p.Trigger(inputs)
	if err != nil || i < 0 || i >= len(inputs) {
		return 0
	}
	return i
}

// persister is the fenced path for an execution's recovery metadata: a
// superseded or released epoch is refused with ErrConflict.
func (e *Engine) persister(executionID string, epoch int64) RecoveryPersister {
	return func(ctx context.Context, metadata json.RawMessage) error {
		return e.store.Transact(ctx, func(tx Tx) error {
			return tx.PersistRecovery(executionID, epoch, metadata)
		})
	}
}

// markRunning marks starting execution x running, fenced by its epoch,
// and returns it; nil when it is no longer starting.
func markRunning(tx Tx, x Execution) (*Execution, error) {
	if m, ok := tx.(StartTx); ok {
		marked, ok, err := m.MarkRunning(x, nil) // nil: keeps the metadata
		if err != nil {
			return nil, err
		}
		if ok {
			return &marked, nil
		}
		// Not marked: the general path below finds out why.
	}
	cur, err := tx.Execution(x.ID)
	if err != nil {
		return nil, err
	}
	if cur.State != ExecutionStarting {
		return nil, nil
	}
	cur.State = ExecutionRunning
	cur.Epoch = x.Epoch // the write is fenced by the epoch this attempt holds
	cur, err = tx.PutExecution(cur)
	if err != nil {
		return nil, err
	}
	return &cur, nil
}

// startPersister is the fenced recovery path of an attempt being started:
// the first persist also marks the execution running in its transaction
// (recorded in running), which spares start its own transaction for that.
//
// That transaction (or start's mark, for a run that persists nothing) is
// the start's second write, and it commits without waiting for the disk
// (transactDeferSync), so a start costs one synced write: the intent.
// What its loss can leave is what a kill between the executor's start and
// this write leaves: an Execution starting with no metadata, which
// recovery finds not adoptable, so it is stopped and retried. It only
// happens when the machine goes down, which ends a local run too. A
// persist after the start (a recovered run's) stays synced.
func (e *Engine) startPersister(x Execution, running *atomic.Pointer[Execution]) RecoveryPersister {
	return func(ctx context.Context, metadata json.RawMessage) error {
		var marked *Execution
		err := transactDeferSync(ctx, e.store, func(tx Tx) error {
			marked = nil
			if running.Load() == nil {
				// The first persist: metadata and state in one fenced write.
				if m, ok := tx.(StartTx); ok {
					replace := metadata
					if replace == nil {
						replace = json.RawMessage{} // stored as none, not kept
					}
					stored, done, err := m.MarkRunning(x, replace)
					if err != nil {
						return fmt.Errorf("persist recovery of execution %q: %w", x.ID, err)
					}
					if done {
						marked = &stored
						return nil
					}
					// Not marked: the general path below finds out why.
				}
				cur, err := tx.Execution(x.ID)
				if err != nil {
					return err
				}
				if cur.State == ExecutionStarting {
					cur.State, cur.Epoch, cur.Recovery = ExecutionRunning, x.Epoch, metadata
					if cur, err = tx.PutExecution(cur); err != nil {
						return fmt.Errorf("persist recovery of execution %q: %w", x.ID, err)
					}
					marked = &cur
					return nil
				}
			}
			return tx.PersistRecovery(x.ID, x.Epoch, metadata)
		})
		if err == nil && marked != nil {
			running.CompareAndSwap(nil, marked)
		}
		return err
	}
}

// PersistRecovery stores recovery metadata for an execution at epoch
// through the fenced path.
func (e *Engine) PersistRecovery(ctx context.Context, executionID string, epoch int64, metadata json.RawMessage) error {
	return e.persister(executionID, epoch)(ctx, metadata)
}

// maxRecoveries bounds the recoveries of one attempt, so an executor that
// crashes on every adoption ends in stop and retry, not a loop.
const maxRecoveries = 3

// observe waits for a run to end and records how. An executor's crash is
// not the run's failure: the run is recovered from its persisted metadata;
// a run that cannot be adopted is stopped, the stop confirmed, and the
// Work retried.
//
// While it observes, the observer renews the attempt's lease (keepLease),
// so a live run's lease never lapses for another holder to take. A renewal
// that finds the lease superseded ends the observation at once: another
// holder observes the run now, and this observer writes nothing more for
// it (its fenced writes would be refused anyway).
func (e *Engine) observe(a *attempt, h RunHandle, o *observation) {
	defer o.end()
	ctx, stopRenewing := o.ctx, o.stopRenewing
	for recoveries := 0; ; {
		res, err := h.Wait(ctx)
		if o.lost() {
			e.release(a.pool) // another holder has the run
			return
		}
		switch {
		case err == nil:
			stopRenewing() // settle releases the lease
			e.settle(a, res)
			return
		case ctx.Err() != nil:
			e.release(a.pool) // observation ended; the run goes on
			return
		case errors.Is(err, ErrExecutorCrashed):
			if recoveries++; recoveries > maxRecoveries {
				stopRenewing()
				e.stopAndRetry(ctx, a, fmt.Errorf("%w: executor crashed %d times in one attempt", ErrNotAdoptable, recoveries))
				return
			}
			next, rerr := e.recoverRun(ctx, a)
			if rerr != nil {
				stopRenewing()
				e.stopAndRetry(ctx, a, rerr)
				return
			}
			h = next
		case errors.Is(err, ErrNotAdoptable):
			// The executor restarted and cannot adopt the run (its
			// adapter recovered it itself): stop what may be left of
			// it, then retry, as after a restart.
			stopRenewing()
			e.stopAndRetry(ctx, a, err)
			return
		default:
			stopRenewing()
			e.settle(a, RunResult{State: ExecutionFailed, Error: "wait: " + err.Error()})
			return
		}
	}
}

func (e *Engine) recoverRun(ctx context.Context, a *attempt) (RunHandle, error) {
	var x Execution
	if err := e.store.View(ctx, func(r ReadTx) error {
		var err error
		x, err = r.Execution(a.exec.ID)
		return err
	}); err != nil {
		return nil, err
	}
	if x.Epoch != a.exec.Epoch {
		return nil, fmt.Errorf("%w: execution %s epoch %d is superseded by %d", ErrConflict, x.ID, a.exec.Epoch, x.Epoch)
	}
	if len(x.Recovery) == 0 {
		return nil, fmt.Errorf("%w: execution %s persisted no recovery metadata", ErrNotAdoptable, x.ID)
	}
	// A recovered run gets a token for its epoch: the one it had before
	// is refused from now on.
	toolbelt, err := e.conf().issueToolbelt(a.binding, x.ID, x.Epoch)
	if err != nil {
		return nil, err
	}
	return a.executor.Recover(ctx, RecoverRequest{
		ExecutionID: x.ID, Attempt: x.Attempt, Epoch: x.Epoch, Work: a.work,
		Recovery: x.Recovery, PersistRecovery: e.persister(x.ID, x.Epoch),
		Config: a.binding.Config, Toolbelt: toolbelt,
	})
}

// stopAndRetry stops a run that could not be adopted and, once the stop
// is confirmed, ends the attempt as stopped, which retries the Work. A
// stop that fails leaves the attempt as it is for an operator: nothing
// retries a run that may still be going. An executor without Stop, or
// whose Stop is ErrUnsupported (an adapter's for an executor that declares
// no stop, such as one whose runs end with its process), cannot confirm
// anything; its run is taken as ended. A Stop that finds no run
// (ErrNotFound: nothing persisted named one to the executor, as after a
// kill between the start and its first persist) has nothing to stop.
func (e *Engine) stopAndRetry(ctx context.Context, a *attempt, cause error) {
	if s, ok := a.executor.(Stopper); ok {
		if err := s.Stop(ctx, a.exec.ID, a.exec.Epoch); err != nil && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrNotFound) {
			e.release(a.pool)
			e.report(fmt.Errorf("execution %s: stop after %v: %w", a.exec.ID, cause, err))
			return
		}
	}
	e.settle(a, RunResult{State: ExecutionStopped, Error: cause.Error()})
}

// settle records how an attempt ended, fenced by its epoch, and moves the
// Work on: done, waiting (an active Wait, or standing Work with no new
// input), pending again with a retry backoff, or failed.
func (e *Engine) settle(a *attempt, res RunResult) {
	// The run is over: its slot is free before the settle commits, so
	// whoever sees the Work end (the Kick below, a client on the change
	// stream) finds room for the next one. Released after the commit, a
	// pass woken by it could find the pool still full and wait for the
	// next wake-up.
	e.release(a.pool)
	ctx := context.WithoutCancel(e.observeCtx)
	c := e.conf()
	err := e.store.Transact(ctx, func(tx Tx) error {
		x, err := tx.Execution(a.exec.ID)
		if err != nil {
			return err
		}
		// The write carries this observer's epoch; the store's fence
		// refuses it if the lease has moved on.
		x.Epoch = a.exec.Epoch
		now := e.clock.Now().UTC()
		x.State, x.Error, x.EndedAt = res.State, res.Error, now
		if !x.State.Valid() || x.State == ExecutionStarting || x.State == ExecutionRunning {
			x.State, x.Error = ExecutionFailed, fmt.Sprintf("executor reported end state %q", res.State)
		}
		if _, err := tx.PutExecution(x); err != nil {
			return err // ErrConflict: a superseded observer is refused
		}
		if err := tx.ReleaseLease(x.Lease, x.Epoch); err != nil {
			return err
		}
		w, err := tx.Work(x.WorkID)
		if err != nil {
			return err
		}
		if w.State != WorkRunning {
			return nil // cancelled meanwhile
		}
		switch x.State {
		case ExecutionSucceeded:
			w.State, err = c.afterSuccess(tx, w)
			if err != nil {
				return err
			}
		default:
			if x.Attempt >= c.Retry.MaxAttempts {
				w.State = WorkFailed
			} else {
				w.State = WorkPending
				due := now.Add(c.backoff(x.Attempt))
				if _, err := tx.ArmTimer(Timer{Key: retryTimerKey(w.ID), ScopeID: w.ScopeID, WorkID: w.ID, Kind: TimerRetry, Due: due}); err != nil {
					return err
				}
			}
		}
		_, err = tx.PutWork(w)
		return err
	})
	if err != nil {
		e.report(fmt.Errorf("execution %s: settle %s: %w", a.exec.ID, res.State, err))
		return
	}
	e.Kick()
}

func (c *engineConf) afterSuccess(tx Tx, w Work) (WorkState, error) {
	if _, err := tx.ActiveWait(w.ID); err == nil {
		return WorkWaiting, nil
	} else if !isNotFound(err) {
		return "", err
	}
	p := c.WorkKinds[w.Kind]
	if p == nil || !p.Standing() {
		return WorkDone, nil
	}
	var cursor int64
	if _, err := kvGetJSON(tx, NamespaceScheduler, inputsKey(w.ID), &cursor); err != nil {
		return "", err
	}
	more, err := tx.WorkEvents(w.ID, cursor, 1)
	if err != nil {
		return "", err
	}
	if len(more) > 0 {
		return WorkPending, nil
	}
	return WorkWaiting, nil
}

// backoff is the wait before the attempt after attempt n.
func (c *engineConf) backoff(n int) time.Duration {
	d := c.Retry.Initial
	for i := 1; i < n && d < c.Retry.Max; i++ {
		d *= 2
	}
	return min(d, c.Retry.Max)
}

// Adopt takes over the Work left running by an earlier engine (after a
// restart): for each, it supersedes the attempt's lease, so the earlier
// observer is refused, and recovers the run from its persisted metadata;
// a run without metadata or not adoptable is stopped and retried. It
// returns the Executions it took over.
func (e *Engine) Adopt(ctx context.Context) ([]Execution, error) {
	var adopted []Execution
	after := ""
	for {
		var works []Work
		if err := e.store.View(ctx, func(r ReadTx) error {
			var err error
			works, err = r.Works(WorkFilter{State: WorkRunning, After: after, Limit: MaxPageLimit})
			return err
		}); err != nil {
			return adopted, err
		}
		for _, w := range works {
			x, err := e.adoptOne(ctx, w)
			if err != nil {
				return adopted, fmt.Errorf("work %s: %w", w.ID, err)
			}
			if x.ID != "" {
				adopted = append(adopted, x)
			}
		}
		if len(works) < MaxPageLimit {
			return adopted, nil
		}
		after = works[len(works)-1].ID
	}
}

func (e *Engine) adoptOne(ctx context.Context, w Work) (Execution, error) {
	c := e.conf()
	binding, ok := c.Bindings[w.Binding]
	if !ok {
		return Execution{}, nil
	}
	var x Execution
	err := e.store.Transact(ctx, func(tx Tx) error {
		xs, err := tx.Executions(w.ID)
		if err != nil {
			return err
		}
		if len(xs) == 0 {
			return nil
		}
		x = xs[len(xs)-1]
		if x.State != ExecutionStarting && x.State != ExecutionRunning {
			x = Execution{}
			return nil
		}
		lease, err := tx.AcquireLease(LeaseRequest{Name: x.Lease, Holder: c.Holder, Now: e.clock.Now().UTC(), TTL: c.LeaseTTL, Supersede: true})
		if err != nil {
			return err
		}
		x.Epoch = lease.Epoch
		x, err = tx.PutExecution(x)
		return err
	})
	if err != nil || x.ID == "" {
		return Execution{}, err
	}
	pool := c.poolOf(w.Binding)
	e.mu.Lock()
	e.running[pool]++ // adopted runs count even over capacity: they are already running
	e.mu.Unlock()
	a := &attempt{exec: x, work: w, binding: binding, executor: c.Executors[binding.Executor], pool: pool}
	e.observers.Add(1)
	e.adopting.Add(1)
	o := e.beginObservation(a)
	go func() {
		defer e.observers.Done()
		h, err := e.recoverRun(o.ctx, a)
		e.adopting.Done()
		if err != nil {
			o.end()
			if o.lost() {
				e.release(a.pool)
				return
			}
			e.stopAndRetry(e.observeCtx, a, err)
			return
		}
		e.observe(a, h, o)
	}()
	return x, nil
}

// WaitAdopted waits until every run Adopt took over has been recovered
// (or found not adoptable), so its executor can be reached through the
// engine's controls: a daemon waits for it before it reports ready.
func (e *Engine) WaitAdopted() { e.adopting.Wait() }
