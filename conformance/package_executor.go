package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	// config is the binding's executor config the run starts with
	// (runConfig), or configErr why it has none.
	config    json.RawMessage
	configErr error
}

func commandConfig(command string) json.RawMessage {
	raw, _ := json.Marshal(map[string]string{"command": command})
	return raw
}

// newRun opens a run with the host and describes its Work and Execution.
func newRun(d PackageDriver, executor, name, command string) *executorRun {
	workID, execID := "work-certify-"+name, "exec-certify-"+name
	runID, recovery := d.OpenRun(workID, execID)
	config, err := runConfig(d, executor, command)
	return &executorRun{executor: executor, runID: runID, recovery: recovery, config: config, configErr: err,
		work: protocol.Work{ID: workID, ScopeID: scope(d), Kind: "certify", State: "running", Revision: 1,
			Context: config, CreatedAt: certifyNow, UpdatedAt: certifyNow},
		exec: protocol.Execution{ID: execID, WorkID: workID, Attempt: 1, Executor: executor, State: "running", StartedAt: certifyNow}}
}

// caller is what runs calls: the supervised process or a spare.
type caller interface {
	Call(ctx context.Context, method string, params, result any) error
}

// start starts the run with its config; command is what newRun made it
// of, for the record.
func (r *executorRun) start(ctx context.Context, c caller, command string) error {
	if r.configErr != nil {
		return r.configErr
	}
	var res protocol.ExecutorRunResult
	err := c.Call(ctx, "executor.run", protocol.ExecutorRunParams{Executor: r.executor, RunID: r.runID, Work: r.work,
		Execution: r.exec, Config: r.config}, &res)
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
	if err := crashAndRestart(ctx, d); err != nil {
		return errors.Join(append(errs, fmt.Errorf("executor %s: %w", executor, err))...)
	}
	// As the host does, recover carries the binding's config.
	if err := d.Call(ctx, "executor.recover", protocol.ExecutorRecoverParams{Executor: executor, RunID: long.runID,
		Work: long.work, Execution: long.exec, Recovery: meta, Config: long.config}, nil); err != nil {
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

// liveMarker is the line a controls run writes first, which executor.live
// must then show.
const liveMarker = "certify-live-output"

// stubbornCommand is the job the controls runs start: it ignores SIGINT
// and SIGTERM and reads no input, so neither an interrupt nor an injected
// line ends it and only a stop that ends its processes does. It writes
// liveMarker, then records its pid in pidFile (written whole, then
// renamed) so certification can watch its process group.
func stubbornCommand(pidFile string) string {
	q := "'" + pidFile + "'"
	tmp := "'" + pidFile + ".tmp'"
	return fmt.Sprintf("trap '' INT TERM; echo %s; echo $$ > %s && mv %s %s; exec sleep 120", liveMarker, tmp, tmp, q)
}

// observedRun is a controls run whose process group certification watches.
type observedRun struct {
	*executorRun
	pgid int
}

// startObserved starts a stubborn run and waits, within
// ExecutorSettleBound, for its command to record its pid, so the check
// knows the run's process group before it acts on the run.
func startObserved(ctx context.Context, d PackageDriver, executor, name, dir string) (*observedRun, error) {
	if strings.ContainsRune(dir, '\'') {
		return nil, fmt.Errorf("the directory %q cannot be quoted for the run's command", dir)
	}
	pidFile := filepath.Join(dir, name+".pid")
	command := stubbornCommand(pidFile)
	run := newRun(d, executor, name, command)
	if err := run.start(ctx, d, command); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(ExecutorSettleBound)
	for {
		data, err := os.ReadFile(pidFile)
		if err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil || pid <= 1 {
				run.stop(ctx, d)
				return nil, fmt.Errorf("executor %s: the run's command recorded %q as its pid", executor, data)
			}
			pgid, err := processGroupOf(pid)
			if err != nil {
				run.stop(ctx, d)
				return nil, fmt.Errorf("executor %s: the run's process group: %w", executor, err)
			}
			return &observedRun{executorRun: run, pgid: pgid}, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			run.stop(ctx, d)
			return nil, fmt.Errorf("executor %s: the run's command (%s) did not run within %v: certification could not observe its processes", executor, command, ExecutorSettleBound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// live calls executor.live on the running run until an output's tail
// holds liveMarker, within ExecutorSettleBound. not_live for a run whose
// process certification sees running is a failure.
func (r *observedRun) live(ctx context.Context, d PackageDriver) error {
	deadline := time.Now().Add(ExecutorSettleBound)
	for {
		var res protocol.ExecutorLiveResult
		err := d.Call(ctx, "executor.live", protocol.ExecutorLiveParams{Executor: r.executor, RunID: r.runID, Tail: 1024}, &res)
		if err != nil {
			return fmt.Errorf("executor %s: executor.live of a running run: %w", r.executor, err)
		}
		for _, o := range res.Outputs {
			if bytes.Contains(o.Tail, []byte(liveMarker)) {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("executor %s: executor.live of a running run answered %d outputs, none whose tail holds the line %q the run wrote", r.executor, len(res.Outputs), liveMarker)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopPhysically stops the run and requires physical-stop evidence: stop
// answers stopped, and by then no process of the run's group runs.
func (r *observedRun) stopPhysically(ctx context.Context, d PackageDriver) error {
	if n, err := groupRunning(r.pgid); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("executor %s: the run's process group %d ended before executor.stop, though its job ignores SIGINT and SIGTERM and reads no input", r.executor, r.pgid)
	}
	sctx, cancel := context.WithTimeout(ctx, 2*ExecutorSettleBound)
	defer cancel()
	var res protocol.ExecutorStopResult
	if err := d.Call(sctx, "executor.stop", protocol.ExecutorStopParams{Executor: r.executor, RunID: r.runID}, &res); err != nil {
		return fmt.Errorf("executor %s: executor.stop: %w", r.executor, err)
	}
	if !res.Stopped {
		return fmt.Errorf("executor %s: executor.stop of a running run answered stopped=false (%s)", r.executor, res.Evidence)
	}
	n, err := groupRunning(r.pgid)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("executor %s: executor.stop answered stopped (%q) while %d processes of the run's group %d still run", r.executor, res.Evidence, n, r.pgid)
	}
	return nil
}

// CheckPackageExecutorControls exercises each control and label method an
// executor declares on runs of its own, whose job ignores SIGINT and
// SIGTERM and reads no input. On one run: live shows the output the run
// wrote (or not at all when undeclared), attach answers (or says there is
// nothing), inject and interrupt are answered. On a second: stop reports
// the run stopped only once its process group is gone, the run then
// settles, resume is answered (or refused as unsupported or invalid) and
// forget drops the settled run.
func CheckPackageExecutorControls(ctx context.Context, d PackageDriver) error {
	dir, err := os.MkdirTemp("", "certify-controls-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
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

		if c.Live || c.Attach || l.Inject || l.Interrupt || !c.Stop {
			run, err := startObserved(ctx, d, e.Name, "controls-"+tag, dir)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if c.Live {
				if err := run.live(ctx, d); err != nil {
					errs = append(errs, err)
				}
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
			// Certification ends this run itself; stop is checked on a run
			// of its own below.
			killGroup(run.pgid)
			res, err := run.wait(ctx, d)
			if err != nil {
				errs = append(errs, fmt.Errorf("after its processes were killed: %w", err))
			}
			if c.Stop {
				run.stop(ctx, d)
			} else {
				// Without stop, resume and forget act on this run.
				if l.Resume {
					answered("executor.resume", protocol.ExecutorResumeParams{Executor: e.Name, RunID: run.runID}, protocol.CodeUnsupported, protocol.CodeInvalid)
				}
				if c.Forget && err == nil && settled(res.State) {
					answered("executor.forget", protocol.ExecutorForgetParams{Executor: e.Name, RunID: run.runID})
				}
			}
		}

		if !c.Stop {
			continue
		}
		run, err := startObserved(ctx, d, e.Name, "stop-"+tag, dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		settledRun := false
		if err := run.stopPhysically(ctx, d); err != nil {
			errs = append(errs, err)
		} else if res, err := run.wait(ctx, d); err != nil {
			errs = append(errs, fmt.Errorf("after executor.stop: %w", err))
		} else if !settled(res.State) {
			errs = append(errs, fmt.Errorf("executor %s: a stopped run settled as %q", e.Name, res.State))
		} else {
			settledRun = true
		}
		if l.Resume {
			answered("executor.resume", protocol.ExecutorResumeParams{Executor: e.Name, RunID: run.runID}, protocol.CodeUnsupported, protocol.CodeInvalid)
		}
		if c.Forget && settledRun {
			answered("executor.forget", protocol.ExecutorForgetParams{Executor: e.Name, RunID: run.runID})
		}
		// Nothing certification started outlives the check.
		killGroup(run.pgid)
		if !settledRun {
			run.stop(ctx, d)
		}
	}
	if checked == 0 {
		return notApplicable("no executor declares a control certification can exercise")
	}
	return errors.Join(errs...)
}
