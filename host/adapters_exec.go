package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/runtime"
)

// Executor is the extension's executor name. It implements every optional
// control of the runtime; a control the manifest does not declare answers
// runtime.ErrUnsupported without a call.
//
// Runs are addressed by unguessable run ids the host assigns (Service.OpenRun),
// so a restarted or stale process cannot act for a run the host no longer
// serves through it. An extension crash is not the run's failure: Wait
// notices that the process was replaced and re-adopts the run on the new
// process with executor.recover and the last recovery metadata persisted
// through the run's fenced persistence.
func (r *Remote) Executor(name string) runtime.Executor {
	var decl protocol.ExecutorDecl
	for _, e := range r.conn.Manifest().Provides.Executors {
		if e.Name == name {
			decl = e
		}
	}
	return &remoteExecutor{r: r, name: name, decl: decl, runs: map[string]*remoteRun{}}
}

type remoteExecutor struct {
	r    *Remote
	name string
	decl protocol.ExecutorDecl

	mu   sync.Mutex
	runs map[string]*remoteRun // by execution id
}

var (
	_ runtime.Executor    = (*remoteExecutor)(nil)
	_ runtime.Resumer     = (*remoteExecutor)(nil)
	_ runtime.Injector    = (*remoteExecutor)(nil)
	_ runtime.Interrupter = (*remoteExecutor)(nil)
	_ runtime.Stopper     = (*remoteExecutor)(nil)
	_ runtime.Forgetter   = (*remoteExecutor)(nil)
	_ runtime.Attacher    = (*remoteExecutor)(nil)
	_ runtime.Liver       = (*remoteExecutor)(nil)
)

// remoteRun is one run the host opened for the extension.
type remoteRun struct {
	e         *remoteExecutor
	run       Run
	work      runtime.Work
	execution runtime.Execution
	gen       uint64 // the process generation that serves it
	// config and toolbelt are the binding's executor config and the
	// attempt's toolbelt, sent again with each executor.recover.
	config   json.RawMessage
	toolbelt runtime.RunToolbelt

	mu         sync.Mutex
	recovery   json.RawMessage // the last metadata persisted through the fence
	persistErr error           // the host's last refusal of a persistence
	// refused says the executor answered not_adoptable: the run persists
	// nothing more, and it is kept only so the engine's stop (which
	// must confirm nothing of it runs before the Work is retried) can
	// still name it to the executor.
	refused bool
}

func (e *remoteExecutor) service() (*Service, error) {
	svc := e.r.conn.Service()
	if svc == nil {
		return nil, fmt.Errorf("%w: no host service for the runs of %s", runtime.ErrUnsupported, e.name)
	}
	return svc, nil
}

// open registers a run whose persistence goes through persist, the fenced
// function, and remembers what it persisted for a later recovery.
func (e *remoteExecutor) open(work runtime.Work, x runtime.Execution, persist runtime.RecoveryPersister, recovery json.RawMessage,
	config json.RawMessage, toolbelt runtime.RunToolbelt) (*remoteRun, error) {
	svc, err := e.service()
	if err != nil {
		return nil, err
	}
	rr := &remoteRun{e: e, work: work, execution: x, recovery: recovery, gen: e.r.conn.Generation(), config: config, toolbelt: toolbelt}
	rr.run = svc.OpenRun(work.ID, x.ID, func(ctx context.Context, metadata json.RawMessage) error {
		if persist == nil {
			return fmt.Errorf("%w: the run persists nothing", runtime.ErrConflict)
		}
		if err := persist(ctx, metadata); err != nil {
			rr.mu.Lock()
			rr.persistErr = err
			rr.mu.Unlock()
			return err
		}
		rr.mu.Lock()
		rr.recovery = append(json.RawMessage(nil), metadata...)
		rr.mu.Unlock()
		return nil
	})
	e.mu.Lock()
	e.runs[x.ID] = rr
	e.mu.Unlock()
	return rr, nil
}

func (e *remoteExecutor) close(rr *remoteRun) {
	if svc := e.r.conn.Service(); svc != nil {
		svc.CloseRun(rr.run.ID)
	}
	e.mu.Lock()
	if e.runs[rr.execution.ID] == rr {
		delete(e.runs, rr.execution.ID)
	}
	e.mu.Unlock()
}

// refuse closes a run the executor could not adopt to persistence, and
// keeps it for the stop that follows.
func (e *remoteExecutor) refuse(rr *remoteRun) {
	if svc := e.r.conn.Service(); svc != nil {
		svc.CloseRun(rr.run.ID)
	}
	rr.mu.Lock()
	rr.refused = true
	rr.mu.Unlock()
}

func (e *remoteExecutor) runOf(executionID string) (*remoteRun, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rr, ok := e.runs[executionID]
	if !ok {
		return nil, fmt.Errorf("%w: no run of execution %q on %s", runtime.ErrNotFound, executionID, e.name)
	}
	return rr, nil
}

func wireExecution(x runtime.Execution) protocol.Execution {
	return protocol.Execution{ID: x.ID, WorkID: x.WorkID, Attempt: x.Attempt, Executor: x.Executor,
		State: string(x.State), Error: x.Error, StartedAt: x.StartedAt, EndedAt: x.EndedAt}
}

func execution(name string, id string, attempt int, epoch int64, work runtime.Work) runtime.Execution {
	return runtime.Execution{ID: id, WorkID: work.ID, Attempt: attempt, Executor: name, Epoch: epoch, State: runtime.ExecutionRunning}
}

func (e *remoteExecutor) Run(ctx context.Context, req runtime.RunRequest) (runtime.RunHandle, error) {
	x := execution(e.name, req.ExecutionID, req.Attempt, req.Epoch, req.Work)
	rr, err := e.open(req.Work, x, req.PersistRecovery, nil, req.Config, req.Toolbelt)
	if err != nil {
		return nil, err
	}
	p := protocol.ExecutorRunParams{Executor: e.name, RunID: rr.run.ID, Work: wireWork(req.Work), Execution: wireExecution(x),
		Config: req.Config, Endpoint: req.Toolbelt.Endpoint, Token: req.Toolbelt.Token}
	for _, ev := range req.Inputs {
		p.Inputs = append(p.Inputs, wireEvent(ev))
	}
	var res protocol.ExecutorRunResult
	if err := e.r.conn.Call(ctx, "executor.run", p, &res); err != nil {
		e.close(rr)
		rr.mu.Lock()
		refused := rr.persistErr
		rr.mu.Unlock()
		if refused != nil {
			// The host refused the persistence that failed the run: its
			// own error, as in process.
			return nil, refused
		}
		return nil, protocolToRuntime(err)
	}
	if len(res.Recovery) > 0 {
		if err := rr.run.Persist(ctx, res.Recovery); err != nil {
			return nil, err
		}
	}
	return rr, nil
}

func (e *remoteExecutor) Recover(ctx context.Context, req runtime.RecoverRequest) (runtime.RunHandle, error) {
	x := execution(e.name, req.ExecutionID, req.Attempt, req.Epoch, req.Work)
	rr, err := e.open(req.Work, x, req.PersistRecovery, req.Recovery, req.Config, req.Toolbelt)
	if err != nil {
		return nil, err
	}
	if err := rr.recover(ctx); err != nil {
		if !errors.Is(err, runtime.ErrNotAdoptable) {
			e.close(rr)
		}
		return nil, err
	}
	return rr, nil
}

// recover adopts the run on the current process from its last metadata.
func (rr *remoteRun) recover(ctx context.Context) error {
	rr.mu.Lock()
	recovery := rr.recovery
	rr.mu.Unlock()
	if len(recovery) == 0 {
		return fmt.Errorf("%w: nothing was persisted for execution %q before the extension restarted", runtime.ErrExecutorCrashed, rr.execution.ID)
	}
	gen := rr.e.r.conn.Generation()
	err := rr.e.r.conn.Call(ctx, "executor.recover", protocol.ExecutorRecoverParams{Executor: rr.e.name, RunID: rr.run.ID,
		Work: wireWork(rr.work), Execution: wireExecution(rr.execution), Recovery: recovery,
		Config: rr.config, Endpoint: rr.toolbelt.Endpoint, Token: rr.toolbelt.Token}, nil)
	if errors.Is(err, protocol.ErrNotAdoptable) {
		rr.e.refuse(rr)
		return fmt.Errorf("%w: %w", runtime.ErrNotAdoptable, err)
	}
	if err != nil {
		return protocolToRuntime(err)
	}
	rr.mu.Lock()
	rr.gen = gen
	rr.mu.Unlock()
	return nil
}

// Wait observes the run. A crash of the extension, or a new process that
// does not know the run, is followed by executor.recover on the new
// process; a crash before anything was persisted is ErrExecutorCrashed,
// and not_adoptable is ErrNotAdoptable, both for the engine's policy.
func (rr *remoteRun) Wait(ctx context.Context) (runtime.RunResult, error) {
	for {
		var res protocol.ExecutorWaitResult
		err := rr.e.r.conn.Call(ctx, "executor.wait", protocol.ExecutorWaitParams{Executor: rr.e.name, RunID: rr.run.ID}, &res)
		if err == nil {
			rr.e.close(rr)
			out := runtime.RunResult{State: runtime.ExecutionState(res.State), Error: res.Error}
			if !out.State.Valid() || out.State == runtime.ExecutionRunning || out.State == runtime.ExecutionStarting {
				out = runtime.RunResult{State: runtime.ExecutionFailed, Error: fmt.Sprintf("the executor answered state %q", res.State)}
			}
			return out, nil
		}
		if ctx.Err() != nil {
			return runtime.RunResult{}, ctx.Err()
		}
		rr.mu.Lock()
		gen := rr.gen
		rr.mu.Unlock()
		replaced := errors.Is(err, jsonrpc.ErrTransport) ||
			errors.Is(err, protocol.ErrNotFound) && rr.e.r.conn.Generation() != gen
		if !replaced {
			return runtime.RunResult{}, protocolToRuntime(err)
		}
		if err := rr.recover(ctx); err != nil && !errors.Is(err, jsonrpc.ErrTransport) {
			return runtime.RunResult{}, err
		}
		// Recovered, or the new process crashed too: observe again.
	}
}

func (e *remoteExecutor) unsupported(control string) error {
	return fmt.Errorf("%w: executor %s does not declare %s", runtime.ErrUnsupported, e.name, control)
}

func (e *remoteExecutor) Resume(ctx context.Context, req runtime.RunRequest, previous json.RawMessage) (runtime.RunHandle, error) {
	if !e.decl.Labels.Resume {
		return nil, e.unsupported("resume")
	}
	x := execution(e.name, req.ExecutionID, req.Attempt, req.Epoch, req.Work)
	rr, err := e.open(req.Work, x, req.PersistRecovery, previous, req.Config, req.Toolbelt)
	if err != nil {
		return nil, err
	}
	p := protocol.ExecutorResumeParams{Executor: e.name, RunID: rr.run.ID, Execution: wireExecution(x),
		Config: req.Config, Endpoint: req.Toolbelt.Endpoint, Token: req.Toolbelt.Token}
	for _, ev := range req.Inputs {
		p.Inputs = append(p.Inputs, wireEvent(ev))
	}
	if err := e.r.conn.Call(ctx, "executor.resume", p, nil); err != nil {
		e.close(rr)
		return nil, protocolToRuntime(err)
	}
	return rr, nil
}

func (e *remoteExecutor) Inject(ctx context.Context, executionID string, input json.RawMessage) error {
	if !e.decl.Labels.Inject {
		return e.unsupported("inject")
	}
	rr, err := e.runOf(executionID)
	if err != nil {
		return err
	}
	text := string(input)
	var s string
	if json.Unmarshal(input, &s) == nil {
		text = s
	}
	return protocolToRuntime(e.r.conn.Call(ctx, "executor.inject", protocol.ExecutorInjectParams{Executor: e.name, RunID: rr.run.ID, Text: text}, nil))
}

func (e *remoteExecutor) Interrupt(ctx context.Context, executionID string) error {
	if !e.decl.Labels.Interrupt {
		return e.unsupported("interrupt")
	}
	rr, err := e.runOf(executionID)
	if err != nil {
		return err
	}
	return protocolToRuntime(e.r.conn.Call(ctx, "executor.interrupt", protocol.ExecutorInterruptParams{Executor: e.name, RunID: rr.run.ID}, nil))
}

func (e *remoteExecutor) Stop(ctx context.Context, executionID string, epoch int64) error {
	if !e.decl.Controls.Stop {
		return e.unsupported("stop")
	}
	rr, err := e.runOf(executionID)
	if err != nil {
		return err
	}
	var res protocol.ExecutorStopResult
	if err := e.r.conn.Call(ctx, "executor.stop", protocol.ExecutorStopParams{Executor: e.name, RunID: rr.run.ID, Epoch: epoch}, &res); err != nil {
		return protocolToRuntime(err)
	}
	if !res.Stopped {
		return fmt.Errorf("executor %s could not confirm that execution %q stopped", e.name, executionID)
	}
	rr.mu.Lock()
	refused := rr.refused
	rr.mu.Unlock()
	if refused {
		e.close(rr) // stopped for good: nothing names it again
	}
	return nil
}

func (e *remoteExecutor) Forget(ctx context.Context, executionID string) error {
	if !e.decl.Controls.Forget {
		return e.unsupported("forget")
	}
	rr, err := e.runOf(executionID)
	if err != nil {
		return err
	}
	err = e.r.conn.Call(ctx, "executor.forget", protocol.ExecutorForgetParams{Executor: e.name, RunID: rr.run.ID}, nil)
	if err == nil {
		e.close(rr)
	}
	return protocolToRuntime(err)
}

func (e *remoteExecutor) Attach(ctx context.Context, executionID string) (json.RawMessage, error) {
	if !e.decl.Controls.Attach {
		return nil, e.unsupported("attach")
	}
	rr, err := e.runOf(executionID)
	if err != nil {
		return nil, err
	}
	var res protocol.ExecutorAttachResult
	if err := e.r.conn.Call(ctx, "executor.attach", protocol.ExecutorAttachParams{Executor: e.name, RunID: rr.run.ID}, &res); err != nil {
		return nil, protocolToRuntime(err)
	}
	return json.Marshal(res)
}

func (e *remoteExecutor) Live(ctx context.Context, executionID string, tail int) (json.RawMessage, error) {
	if !e.decl.Controls.Live {
		return nil, e.unsupported("live")
	}
	rr, err := e.runOf(executionID)
	if err != nil {
		return nil, err
	}
	var res protocol.ExecutorLiveResult
	if err := e.r.conn.Call(ctx, "executor.live", protocol.ExecutorLiveParams{Executor: e.name, RunID: rr.run.ID, Tail: tail}, &res); err != nil {
		return nil, protocolToRuntime(err)
	}
	return json.Marshal(res)
}
