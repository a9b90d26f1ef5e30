package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/runtime"
)

// ExecutorCheckTimeout bounds each executor check.
var ExecutorCheckTimeout = 2 * time.Minute

// ExecutorTarget is one executor under test. Executor stays the same value
// across crashes, as the host's adapter does while the process behind it
// restarts.
type ExecutorTarget struct {
	Executor runtime.Executor
	// Crash ends the executor's process abruptly. Its runs go on (they are
	// detached); Wait on a handle from before the crash reports either the
	// run's end or runtime.ErrExecutorCrashed; the next call starts a new
	// process.
	Crash func(ctx context.Context) error
	// Finish ends the run of an execution with state (succeeded or
	// failed), as the work itself would.
	Finish func(ctx context.Context, executionID string, state runtime.ExecutionState) error
	// Close, optional, releases the target.
	Close func() error
}

// ExecutorDriver makes fresh executors and stores.
type ExecutorDriver struct {
	New func(ctx context.Context) (ExecutorTarget, error)
	// NewStore opens a fresh, empty store for the check that runs the
	// executor under the engine's scheduler; the suite closes it.
	NewStore func() (runtime.Store, error)
}

type executorCheck struct {
	name string
	run  func(ctx context.Context, d ExecutorDriver, x ExecutorTarget) error
}

var executorChecks = []executorCheck{
	{"run_and_wait", checkRunAndWait},
	{"persists_recovery", checkPersistsRecovery},
	{"persist_refusal_propagates", checkPersistRefusal},
	{"wait_cancel_observes_only", checkWaitCancel},
	{"crash_then_recover", checkCrashRecover},
	{"recover_unknown_not_adoptable", checkRecoverUnknown},
	{"stop", checkStop},
	{"scheduler_adopts_after_crash", checkSchedulerAdopts},
}

// CheckExecutor runs every executor check and returns the failures joined.
func CheckExecutor(ctx context.Context, d ExecutorDriver) error {
	return checkAll(ctx, executorSuite(d))
}

// RunExecutor runs every executor check as a named subtest.
func RunExecutor(t *testing.T, d ExecutorDriver) {
	t.Helper()
	runAll(t, executorSuite(d))
}

func executorSuite(d ExecutorDriver) []namedCheck {
	return bind(executorChecks, func(c executorCheck) namedCheck {
		return namedCheck{name: c.name, run: func(ctx context.Context) error { return runExecutorCheck(ctx, d, c) }}
	})
}

func runExecutorCheck(ctx context.Context, d ExecutorDriver, c executorCheck) (err error) {
	ctx, cancel := context.WithTimeout(ctx, ExecutorCheckTimeout)
	defer cancel()
	x, err := d.New(ctx)
	if err != nil {
		return fmt.Errorf("new executor: %w", err)
	}
	if x.Close != nil {
		defer func() {
			if cerr := x.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	return c.run(ctx, d, x)
}

// recoveryLog is the suite's side of PersistRecovery: it keeps the last
// metadata, or refuses with refuse.
type recoveryLog struct {
	mu     sync.Mutex
	last   json.RawMessage
	refuse error
}

func (l *recoveryLog) persist(_ context.Context, m json.RawMessage) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse != nil {
		return l.refuse
	}
	l.last = append(json.RawMessage(nil), m...)
	return nil
}

func (l *recoveryLog) metadata() json.RawMessage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

var runSeq struct {
	sync.Mutex
	n int
}

func runRequest(log *recoveryLog) runtime.RunRequest {
	runSeq.Lock()
	runSeq.n++
	n := runSeq.n
	runSeq.Unlock()
	id := fmt.Sprintf("conformance-ex-%d", n)
	return runtime.RunRequest{
		ExecutionID: id, Attempt: 1, Epoch: 1,
		Work:            runtime.Work{ID: "conformance-work-" + id, ScopeID: "conformance", Kind: "conformance", State: runtime.WorkRunning},
		PersistRecovery: log.persist,
	}
}

func wantState(ctx context.Context, h runtime.RunHandle, want runtime.ExecutionState) error {
	res, err := h.Wait(ctx)
	if err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	if res.State != want {
		return fmt.Errorf("run ended %q, want %q", res.State, want)
	}
	return nil
}

func checkRunAndWait(ctx context.Context, _ ExecutorDriver, x ExecutorTarget) error {
	var errs []error
	for _, want := range []runtime.ExecutionState{runtime.ExecutionSucceeded, runtime.ExecutionFailed} {
		req := runRequest(&recoveryLog{})
		h, err := x.Executor.Run(ctx, req)
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		if err := x.Finish(ctx, req.ExecutionID, want); err != nil {
			return fmt.Errorf("finish: %w", err)
		}
		if err := wantState(ctx, h, want); err != nil {
			errs = append(errs, fmt.Errorf("a run finished %s: %w", want, err))
		}
	}
	return errors.Join(errs...)
}

func checkPersistsRecovery(ctx context.Context, _ ExecutorDriver, x ExecutorTarget) error {
	log := &recoveryLog{}
	req := runRequest(log)
	h, err := x.Executor.Run(ctx, req)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	m := log.metadata()
	if len(m) == 0 {
		return errors.New("Run returned without persisting recovery metadata: a crash now could not be recovered")
	}
	if !json.Valid(m) {
		return fmt.Errorf("recovery metadata %q is not JSON", m)
	}
	if err := x.Finish(ctx, req.ExecutionID, runtime.ExecutionSucceeded); err != nil {
		return err
	}
	return wantState(ctx, h, runtime.ExecutionSucceeded)
}

func checkPersistRefusal(ctx context.Context, _ ExecutorDriver, x ExecutorTarget) error {
	refusal := fmt.Errorf("%w: conformance: epoch superseded", runtime.ErrConflict)
	log := &recoveryLog{refuse: refusal}
	req := runRequest(log)
	h, err := x.Executor.Run(ctx, req)
	if err == nil {
		// A run the host refused to persist for must not go on unseen.
		_ = x.Finish(ctx, req.ExecutionID, runtime.ExecutionFailed)
		_, _ = h.Wait(ctx)
		return errors.New("Run succeeded although the host refused its recovery metadata")
	}
	if !errors.Is(err, runtime.ErrConflict) {
		return fmt.Errorf("Run failed with %v, not the host's refusal (conflict)", err)
	}
	return nil
}

func checkWaitCancel(ctx context.Context, _ ExecutorDriver, x ExecutorTarget) error {
	req := runRequest(&recoveryLog{})
	h, err := x.Executor.Run(ctx, req)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := h.Wait(cctx); err == nil {
		return errors.New("Wait with a cancelled context reported an outcome of a run that had not ended")
	}
	if err := x.Finish(ctx, req.ExecutionID, runtime.ExecutionSucceeded); err != nil {
		return err
	}
	if err := wantState(ctx, h, runtime.ExecutionSucceeded); err != nil {
		return fmt.Errorf("after a cancelled Wait the run must go on: %w", err)
	}
	return nil
}

// checkCrashRecover crashes the executor while its run goes on, lets the
// run end while the executor is down, and then requires two things: Wait
// on the handle from before the crash either reports the run's end (an
// adapter that re-adopts the run inside Wait) or runtime.ErrExecutorCrashed
// (an executor that leaves adoption to the scheduler), never another
// error; and Recover from the persisted metadata adopts the run and
// reports how it ended.
func checkCrashRecover(ctx context.Context, _ ExecutorDriver, x ExecutorTarget) error {
	log := &recoveryLog{}
	req := runRequest(log)
	h, err := x.Executor.Run(ctx, req)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if err := x.Crash(ctx); err != nil {
		return fmt.Errorf("crash: %w", err)
	}
	if err := x.Finish(ctx, req.ExecutionID, runtime.ExecutionSucceeded); err != nil {
		return err
	}
	res, err := h.Wait(ctx)
	switch {
	case errors.Is(err, runtime.ErrExecutorCrashed):
	case err != nil:
		return fmt.Errorf("Wait across the executor's crash: got %v, want the run's end or executor crashed", err)
	case res.State != runtime.ExecutionSucceeded:
		return fmt.Errorf("Wait across the executor's crash: the run ended %s, want %s", res.State, runtime.ExecutionSucceeded)
	}
	h2, err := x.Executor.Recover(ctx, runtime.RecoverRequest{
		ExecutionID: req.ExecutionID, Attempt: req.Attempt, Epoch: req.Epoch + 1, Work: req.Work,
		Recovery: log.metadata(), PersistRecovery: log.persist,
	})
	if err != nil {
		return fmt.Errorf("recover from the persisted metadata: %w", err)
	}
	if err := wantState(ctx, h2, runtime.ExecutionSucceeded); err != nil {
		return fmt.Errorf("the recovered run: %w", err)
	}
	return nil
}

func checkRecoverUnknown(ctx context.Context, _ ExecutorDriver, x ExecutorTarget) error {
	log := &recoveryLog{}
	_, err := x.Executor.Recover(ctx, runtime.RecoverRequest{
		ExecutionID: "conformance-unknown", Attempt: 1, Epoch: 1,
		Recovery: json.RawMessage(`{"conformance":"no such run"}`), PersistRecovery: log.persist,
	})
	if !errors.Is(err, runtime.ErrNotAdoptable) {
		return fmt.Errorf("recovering metadata of no run: got %v, want not adoptable", err)
	}
	return nil
}

func checkStop(ctx context.Context, _ ExecutorDriver, x ExecutorTarget) error {
	s, ok := x.Executor.(runtime.Stopper)
	if !ok {
		return nil
	}
	req := runRequest(&recoveryLog{})
	h, err := x.Executor.Run(ctx, req)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if err := s.Stop(ctx, req.ExecutionID, req.Epoch); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	return wantState(ctx, h, runtime.ExecutionStopped)
}

// checkSchedulerAdopts runs the executor under the engine: a crash while
// the attempt runs must end in the same attempt succeeding, never in a
// stop and retry.
func checkSchedulerAdopts(ctx context.Context, d ExecutorDriver, x ExecutorTarget) (err error) {
	s, err := d.NewStore()
	if err != nil {
		return fmt.Errorf("opening a store: %w", err)
	}
	defer func() {
		if cerr := s.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	var bg []error
	var mu sync.Mutex
	e, err := runtime.New(runtime.Config{
		Store:     s,
		Bindings:  map[string]runtime.Binding{"b": {Executor: "x"}},
		Executors: map[string]runtime.Executor{"x": x.Executor},
		OnError: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			bg = append(bg, err)
		},
	})
	if err != nil {
		return err
	}
	defer e.Close()
	const workID = "conformance-work"
	err = s.Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutWork(runtime.Work{ID: workID, ScopeID: "conformance", Kind: "conformance", Binding: "b", State: runtime.WorkPending})
		return err
	})
	if err != nil {
		return err
	}
	started, err := e.StartPending(ctx)
	if err != nil {
		return err
	}
	if len(started) != 1 {
		return fmt.Errorf("the scheduler started %d executions, want 1", len(started))
	}
	if err := x.Crash(ctx); err != nil {
		return fmt.Errorf("crash: %w", err)
	}
	if err := x.Finish(ctx, started[0].ID, runtime.ExecutionSucceeded); err != nil {
		return err
	}
	e.Drain()
	var (
		w  runtime.Work
		xs []runtime.Execution
	)
	err = s.View(ctx, func(r runtime.ReadTx) error {
		if w, err = r.Work(workID); err != nil {
			return err
		}
		xs, err = r.Executions(workID)
		return err
	})
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	switch {
	case len(xs) != 1:
		return fmt.Errorf("%d attempts after a crash, want the one attempt adopted", len(xs))
	case xs[0].State != runtime.ExecutionSucceeded:
		return fmt.Errorf("the attempt ended %q (%s) after the crash, want succeeded", xs[0].State, xs[0].Error)
	case w.State != runtime.WorkDone:
		return fmt.Errorf("the Work is %q, want done", w.State)
	case len(bg) > 0:
		return fmt.Errorf("the engine reported: %w", errors.Join(bg...))
	}
	return nil
}
