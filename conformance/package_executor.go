package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// ExecutorSettleBound is how long a run certification starts may take to
// settle once it ended or was stopped.
var ExecutorSettleBound = 10 * time.Second

// Certification starts executor runs with a command, passed as
// {"command": "..."} in both the binding's config and the Work's context:
// a shell command an executor that runs programs starts.
const (
	cmdQuick = "exit 0"
	cmdShort = "sleep 1; exit 0"
	cmdLong  = "sleep 30"
)

// executorRun is one run certification started.
type executorRun struct {
	executor string
	runID    string
	work     protocol.Work
	exec     protocol.Execution
	recovery func() json.RawMessage
}

func commandConfig(command string) json.RawMessage {
	raw, _ := json.Marshal(map[string]string{"command": command})
	return raw
}

// newRun opens a run with the host and describes its Work and Execution.
func newRun(d PackageDriver, executor, name, command string) *executorRun {
	workID, execID := "work-certify-"+name, "exec-certify-"+name
	runID, recovery := d.OpenRun(workID, execID)
	return &executorRun{executor: executor, runID: runID, recovery: recovery,
		work: protocol.Work{ID: workID, ScopeID: scope(d), Kind: "certify", State: "running", Revision: 1,
			Context: commandConfig(command), CreatedAt: certifyNow, UpdatedAt: certifyNow},
		exec: protocol.Execution{ID: execID, WorkID: workID, Attempt: 1, Executor: executor, State: "running", StartedAt: certifyNow}}
}

// caller is what runs calls: the supervised process or a spare.
type caller interface {
	Call(ctx context.Context, method string, params, result any) error
}

func (r *executorRun) start(ctx context.Context, c caller, command string) error {
	var res protocol.ExecutorRunResult
	err := c.Call(ctx, "executor.run", protocol.ExecutorRunParams{Executor: r.executor, RunID: r.runID, Work: r.work,
		Execution: r.exec, Config: commandConfig(command)}, &res)
	if err != nil {
		return fmt.Errorf("executor %s: executor.run: %w", r.executor, err)
	}
	return nil
}

// wait waits for the run to settle within ExecutorSettleBound.
func (r *executorRun) wait(ctx context.Context, c caller) (protocol.ExecutorWaitResult, error) {
	ctx, cancel := context.WithTimeout(ctx, ExecutorSettleBound)
	defer cancel()
	var res protocol.ExecutorWaitResult
	err := c.Call(ctx, "executor.wait", protocol.ExecutorWaitParams{Executor: r.executor, RunID: r.runID}, &res)
	if errors.Is(err, context.DeadlineExceeded) {
		return res, fmt.Errorf("executor %s: run %s did not settle within %v", r.executor, r.runID, ExecutorSettleBound)
	}
	if err != nil {
		return res, fmt.Errorf("executor %s: executor.wait: %w", r.executor, err)
	}
	return res, nil
}

// stop stops a run left running, best effort.
func (r *executorRun) stop(ctx context.Context, c caller) { _ = r.stopped(ctx, c) }

// stopped stops a run and says whether the executor stopped it.
func (r *executorRun) stopped(ctx context.Context, c caller) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ExecutorSettleBound)
	defer cancel()
	var res protocol.ExecutorStopResult
	if err := c.Call(ctx, "executor.stop", protocol.ExecutorStopParams{Executor: r.executor, RunID: r.runID}, &res); err != nil {
		return err
	}
	if !res.Stopped {
		return errors.New("executor.stop answered stopped=false")
	}
	return nil
}

func settled(state string) bool {
	switch state {
	case "succeeded", "failed", "stopped":
		return true
	}
	return false
}

// CheckPackageExecutorLifecycle runs each executor: a quick run must
// persist its recovery metadata and settle as succeeded through wait; a
// run in progress when the package is killed must be adopted by the
// restarted package through recover with that metadata and settle; and
// recover with metadata it cannot adopt must answer not_adoptable.
func CheckPackageExecutorLifecycle(ctx context.Context, d PackageDriver) error {
	if len(d.Manifest().Provides.Executors) == 0 {
		return notApplicable("the manifest declares no executor")
	}
	var errs []error
	for i, e := range d.Manifest().Provides.Executors {
		if err := checkExecutorLifecycle(ctx, d, e.Name, fmt.Sprintf("%d-%d", i, time.Now().UnixNano())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func checkExecutorLifecycle(ctx context.Context, d PackageDriver, executor, tag string) error {
	quick := newRun(d, executor, "quick-"+tag, cmdQuick)
	if err := quick.start(ctx, d, cmdQuick); err != nil {
		return err
	}
	res, err := quick.wait(ctx, d)
	if err != nil {
		return err
	}
	var errs []error
	if res.State != "succeeded" {
		errs = append(errs, fmt.Errorf("executor %s: a run of %q settled %q (%s), not succeeded", executor, cmdQuick, res.State, res.Error))
	}
	if len(quick.recovery()) == 0 {
		errs = append(errs, fmt.Errorf("executor %s: the run persisted no recovery metadata through execution.persist_recovery", executor))
	}

	// A run the package must adopt again after a crash.
	long := newRun(d, executor, "recover-"+tag, cmdShort)
	if err := long.start(ctx, d, cmdShort); err != nil {
		return errors.Join(append(errs, err)...)
	}
	meta := long.recovery()
	if err := restartByKill(ctx, d); err != nil {
		return errors.Join(append(errs, fmt.Errorf("executor %s: %w", executor, err))...)
	}
	if err := d.Call(ctx, "executor.recover", protocol.ExecutorRecoverParams{Executor: executor, RunID: long.runID,
		Work: long.work, Execution: long.exec, Recovery: meta}, nil); err != nil {
		errs = append(errs, fmt.Errorf("executor %s: the restarted package did not adopt its run through executor.recover: %w", executor, err))
	} else if res, err := long.wait(ctx, d); err != nil {
		errs = append(errs, err)
	} else if res.State != "succeeded" {
		errs = append(errs, fmt.Errorf("executor %s: the adopted run settled %q (%s), not succeeded", executor, res.State, res.Error))
	}

	// Metadata nobody wrote is not adoptable.
	bogus := newRun(d, executor, "bogus-"+tag, cmdQuick)
	err = d.Call(ctx, "executor.recover", protocol.ExecutorRecoverParams{Executor: executor, RunID: bogus.runID,
		Work: bogus.work, Execution: bogus.exec, Recovery: json.RawMessage(`{"certify":"nothing was started"}`)}, nil)
	if !errors.Is(err, protocol.ErrNotAdoptable) {
		errs = append(errs, fmt.Errorf("executor %s: recover of a run it never started answered %v, not %s", executor, err, protocol.CodeNotAdoptable))
	}
	return errors.Join(errs...)
}

// restartByKill kills the supervised process and waits until the host has
// it serving again.
func restartByKill(ctx context.Context, d PackageDriver) error {
	gen := d.Generation()
	if err := d.Kill(); err != nil {
		return fmt.Errorf("killing the package: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, PackageRestartBound)
	defer cancel()
	var err error
	for rctx.Err() == nil {
		if err = d.Call(rctx, "configure", d.ConfigureParams(), nil); err == nil && d.Generation() > gen {
			return nil
		}
	}
	return fmt.Errorf("the package was not serving again within %v of being killed: %v", PackageRestartBound, err)
}

// CheckPackageExecutorControls exercises each control and label method an
// executor declares on a run of its own: live and attach answer (or say
// there is nothing), inject and interrupt are answered, stop reports the
// run stopped and it then settles, forget drops the settled run, and
// resume is answered (or refused as unsupported or invalid).
func CheckPackageExecutorControls(ctx context.Context, d PackageDriver) error {
	var errs []error
	checked := 0
	for i, e := range d.Manifest().Provides.Executors {
		tag := fmt.Sprintf("%d-%d", i, time.Now().UnixNano())
		c, l := e.Controls, e.Labels
		if !(c.Live || c.Attach || c.Stop || c.Forget || l.Inject || l.Interrupt || l.Resume) {
			continue
		}
		checked++
		answered := func(method string, params any, acceptable ...protocol.Code) {
			err := d.Call(ctx, method, params, nil)
			if err == nil {
				return
			}
			for _, code := range acceptable {
				if protocol.CodeOf(err) == code {
					return
				}
			}
			errs = append(errs, fmt.Errorf("executor %s: %s: %w", e.Name, method, err))
		}
		run := newRun(d, e.Name, "controls-"+tag, cmdLong)
		if err := run.start(ctx, d, cmdLong); err != nil {
			errs = append(errs, err)
			continue
		}
		if c.Live {
			answered("executor.live", protocol.ExecutorLiveParams{Executor: e.Name, RunID: run.runID, Tail: 1024}, protocol.CodeNotLive)
		}
		if c.Attach {
			answered("executor.attach", protocol.ExecutorAttachParams{Executor: e.Name, RunID: run.runID}, protocol.CodeNothingToAttach)
		}
		if l.Inject {
			answered("executor.inject", protocol.ExecutorInjectParams{Executor: e.Name, RunID: run.runID, Text: "0\n"})
		}
		if l.Interrupt {
			// An interrupt asks the run to stop what it does; whether the
			// run then ends is the executor's own affair.
			answered("executor.interrupt", protocol.ExecutorInterruptParams{Executor: e.Name, RunID: run.runID})
		}
		settledRun := false
		if c.Stop {
			var res protocol.ExecutorStopResult
			if err := d.Call(ctx, "executor.stop", protocol.ExecutorStopParams{Executor: e.Name, RunID: run.runID}, &res); err != nil {
				errs = append(errs, fmt.Errorf("executor %s: executor.stop: %w", e.Name, err))
			} else if !res.Stopped {
				errs = append(errs, fmt.Errorf("executor %s: executor.stop of a running run answered stopped=false", e.Name))
			}
			if res, err := run.wait(ctx, d); err != nil {
				errs = append(errs, fmt.Errorf("after executor.stop: %w", err))
			} else if !settled(res.State) {
				errs = append(errs, fmt.Errorf("executor %s: a stopped run settled as %q", e.Name, res.State))
			} else {
				settledRun = true
			}
		}
		if l.Resume {
			answered("executor.resume", protocol.ExecutorResumeParams{Executor: e.Name, RunID: run.runID}, protocol.CodeUnsupported, protocol.CodeInvalid)
		}
		if c.Forget && settledRun {
			answered("executor.forget", protocol.ExecutorForgetParams{Executor: e.Name, RunID: run.runID})
		}
		if !settledRun {
			run.stop(ctx, d)
		}
	}
	if checked == 0 {
		return notApplicable("no executor declares a control certification can exercise")
	}
	return errors.Join(errs...)
}
