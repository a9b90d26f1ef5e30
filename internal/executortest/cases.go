package executortest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/internal/packagetest"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// The job commands. Each blocks on its input until the test says how it
// ends, so no test waits on time.
const (
	EchoInput  = `read line; echo "got $line"`          // ends with what it was told
	ExitInput  = `read code; exit "$code"`              // exits with the status it is sent
	IgnoreTerm = `trap '' TERM; echo ready; read never` // needs SIGKILL
)

// inEachMode runs body as a subtest in each of the Modes, over a fresh
// fixture.
func (x Executor) inEachMode(t *testing.T, body func(t *testing.T, m Mode, f *Fixture)) {
	for _, m := range Modes {
		t.Run(m.Name, func(t *testing.T) { body(t, m, NewFixture(t, x, m)) })
	}
}

// The methods below named Test… are the bodies of the package tests of the
// same name, in every mode.

// TestRunWaitInject: run, live, inject, wait, and the refusals around them.
func (x Executor) TestRunWaitInject(t *testing.T) {
	x.inEachMode(t, func(t *testing.T, _ Mode, f *Fixture) {
		ctx := Context(t)
		rec := f.Run(t, "run-1", EchoInput)
		assert.True(t, Alive(rec.PID))
		assert.Equal(t, rec.PID, rec.PGID, "the job leads a process group of its own")

		var live protocol.ExecutorLiveResult
		require.NoError(t, f.C.Call(ctx, "executor.live", protocol.ExecutorLiveParams{Executor: x.Name, RunID: "run-1"}, &live))
		var names []string
		for _, o := range live.Outputs {
			names = append(names, o.Name)
		}
		require.Equal(t, x.LiveOutputs, names, "the live outputs, each on its own")

		require.NoError(t, f.Inject(t, "run-1", "hello"))
		res := f.Wait(t, "run-1")
		assert.Equal(t, "succeeded", res.State)
		out, err := os.ReadFile(filepath.Join(rec.Dir, x.LiveOutputs[0]))
		require.NoError(t, err)
		assert.Equal(t, "got hello\n", string(out))

		err = f.C.Call(ctx, "executor.live", protocol.ExecutorLiveParams{Executor: x.Name, RunID: "run-1"}, nil)
		assert.ErrorIs(t, err, protocol.ErrNotLive, "a settled run has no live output")
		assert.ErrorIs(t, f.Inject(t, "run-1", "late"), protocol.ErrConflict)

		f.Run(t, "run-2", ExitInput)
		require.NoError(t, f.Inject(t, "run-2", "3"))
		res = f.Wait(t, "run-2")
		assert.Equal(t, "failed", res.State)
		assert.Equal(t, 3, res.ExitCode)

		err = f.C.Call(ctx, "executor.wait", protocol.ExecutorWaitParams{Executor: x.Name, RunID: "unknown"}, nil)
		assert.ErrorIs(t, err, protocol.ErrNotFound)
		err = f.C.Call(ctx, "executor.run", protocol.ExecutorRunParams{Executor: x.Name, RunID: "run-3", Config: json.RawMessage(`{"command":7}`)}, nil)
		assert.ErrorIs(t, err, protocol.ErrInvalid, "a config that is not one")

		// Events are injected as JSON lines.
		rec = f.Run(t, "run-5", EchoInput)
		require.NoError(t, f.C.Call(ctx, "executor.inject", protocol.ExecutorInjectParams{Executor: x.Name, RunID: "run-5",
			Events: []protocol.Event{{ID: "ev-1", Family: "notes.note", Root: "ev-1"}}}, nil))
		assert.Equal(t, "succeeded", f.Wait(t, "run-5").State)
		out, err = os.ReadFile(filepath.Join(rec.Dir, x.LiveOutputs[0]))
		require.NoError(t, err)
		assert.Contains(t, string(out), `got {"id":"ev-1"`)
		err = f.C.Call(ctx, "executor.inject", protocol.ExecutorInjectParams{Executor: x.Name, RunID: "run-5"}, nil)
		assert.Error(t, err, "nothing to inject")

		// Without a command the job waits to be told its status.
		require.NoError(t, f.C.Call(ctx, "executor.run", protocol.ExecutorRunParams{Executor: x.Name, RunID: "run-4", Config: Config("")}, nil))
		require.NoError(t, f.Inject(t, "run-4", "5"))
		res = f.Wait(t, "run-4")
		assert.Equal(t, 5, res.ExitCode)
	})
}

// TestInterrupt: SIGINT ends the job, and its status is recorded.
func (x Executor) TestInterrupt(t *testing.T) {
	x.inEachMode(t, func(t *testing.T, _ Mode, f *Fixture) {
		ctx := Context(t)
		f.Run(t, "run-1", ExitInput)
		require.NoError(t, f.C.Call(ctx, "executor.interrupt", protocol.ExecutorInterruptParams{Executor: x.Name, RunID: "run-1"}, nil))
		res := f.Wait(t, "run-1")
		assert.Equal(t, "failed", res.State)
		assert.Equal(t, 130, res.ExitCode, "SIGINT ended the command, and its status was recorded")
	})
}

// TestStop: stop answers once the job's group is gone, a job that ignores
// SIGTERM included; forget drops a settled run only.
func (x Executor) TestStop(t *testing.T) {
	grace := *x.StopGrace
	*x.StopGrace = 200 * time.Millisecond // the in-process executors read it; a child process keeps the default
	t.Cleanup(func() { *x.StopGrace = grace })
	x.inEachMode(t, func(t *testing.T, _ Mode, f *Fixture) {
		ctx := Context(t)
		for _, command := range []string{ExitInput, IgnoreTerm} {
			rec := f.Run(t, "run-"+command, command)
			var res protocol.ExecutorStopResult
			require.NoError(t, f.C.Call(ctx, "executor.stop", protocol.ExecutorStopParams{Executor: x.Name, RunID: "run-" + command, Epoch: 1}, &res))
			assert.True(t, res.Stopped, res.Evidence)
			assert.True(t, GroupEmpty(rec.PGID), "stop answered while the job's group still runs: %s", res.Evidence)
			assert.False(t, Alive(rec.PID))
			assert.Equal(t, "stopped", f.Wait(t, "run-"+command).State)
		}

		// Forget drops a settled run's directory, and refuses a
		// running one.
		rec := f.Run(t, "run-forget", ExitInput)
		err := f.C.Call(ctx, "executor.forget", protocol.ExecutorForgetParams{Executor: x.Name, RunID: "run-forget"}, nil)
		assert.ErrorIs(t, err, protocol.ErrConflict)
		require.NoError(t, f.Inject(t, "run-forget", "0"))
		f.Wait(t, "run-forget")
		require.NoError(t, f.C.Call(ctx, "executor.forget", protocol.ExecutorForgetParams{Executor: x.Name, RunID: "run-forget"}, nil))
		_, err = os.Stat(rec.Dir)
		assert.True(t, errors.Is(err, os.ErrNotExist), "the run's directory is gone")
	})
}

// TestPersistRefusal: the host's refusal to persist a run's metadata
// comes back as it is, and nothing of the run keeps running.
func (x Executor) TestPersistRefusal(t *testing.T) {
	x.inEachMode(t, func(t *testing.T, _ Mode, f *Fixture) {
		f.Refuse(protocol.Errorf(protocol.CodeConflict, "the lease moved on"))
		err := f.C.Call(Context(t), "executor.run", protocol.ExecutorRunParams{Executor: x.Name, RunID: "run-1", Config: Config(ExitInput)}, nil)
		assert.ErrorIs(t, err, protocol.ErrConflict, "the host's refusal comes back as it is")
		entries, err := os.ReadDir(filepath.Join(f.Dir, "runs"))
		require.NoError(t, err)
		require.Len(t, entries, 1)
		meta, err := os.ReadFile(filepath.Join(f.Dir, "runs", entries[0].Name(), x.MetaFile))
		require.NoError(t, err)
		var rec Record
		require.NoError(t, json.Unmarshal(meta, &rec))
		assert.True(t, GroupEmpty(rec.PGID), "nothing keeps running for a run the host refused")
	})
}

// TestRecover restarts the executor (in process: a fresh value; as a
// process: SIGKILL to it) while a job runs, and adopts the job from its
// persisted metadata in the new executor.
func (x Executor) TestRecover(t *testing.T) {
	x.inEachMode(t, func(t *testing.T, m Mode, f *Fixture) {
		ctx := Context(t)
		running := f.Run(t, "run-running", EchoInput)
		finished := f.Run(t, "run-finished", ExitInput)
		gone := f.Run(t, "run-gone", ExitInput)
		if f.Proc != nil {
			f.Proc.Kill()
		}
		assert.True(t, Alive(running.PID), "the job survives the executor")

		// While no executor holds them, one job finishes and records
		// its status, and another is killed before it could.
		require.NoError(t, x.WriteInput(finished, "4"))
		require.NoError(t, WaitGone(ctx, finished.PID))
		KillGroup(gone.PGID)
		require.NoError(t, WaitGone(ctx, gone.PID))

		f.Restart(t, m)
		err := f.C.Call(ctx, "executor.wait", protocol.ExecutorWaitParams{Executor: x.Name, RunID: "run-running"}, nil)
		assert.ErrorIs(t, err, protocol.ErrNotFound, "a new executor knows no run before it recovers it")

		recoverRun := func(runID string, meta json.RawMessage) error {
			return f.C.Call(ctx, "executor.recover", protocol.ExecutorRecoverParams{Executor: x.Name, RunID: runID, Recovery: meta}, nil)
		}
		require.NoError(t, recoverRun("run-running", f.Recovery("run-running")))
		require.NoError(t, f.Inject(t, "run-running", "after the restart"))
		assert.Equal(t, "succeeded", f.Wait(t, "run-running").State)
		out, err := os.ReadFile(filepath.Join(running.Dir, x.LiveOutputs[0]))
		require.NoError(t, err)
		assert.Equal(t, "got after the restart\n", string(out))

		require.NoError(t, recoverRun("run-finished", f.Recovery("run-finished")))
		res := f.Wait(t, "run-finished")
		assert.Equal(t, "failed", res.State)
		assert.Equal(t, 4, res.ExitCode, "the status the job recorded on disk")

		assert.ErrorIs(t, recoverRun("run-gone", f.Recovery("run-gone")), protocol.ErrNotAdoptable, "gone without a recorded status")
		assert.ErrorIs(t, recoverRun("run-x", json.RawMessage(`{"garbage":true}`)), protocol.ErrNotAdoptable)
		// Metadata naming a directory that is not its run's own is
		// refused: recovery never reaches outside the executor's runs.
		var forged Record
		require.NoError(t, json.Unmarshal(f.Recovery("run-finished"), &forged))
		forged.Dir = running.Dir
		forgedJSON, err := json.Marshal(forged)
		require.NoError(t, err)
		assert.ErrorIs(t, recoverRun("run-x", forgedJSON), protocol.ErrNotAdoptable, "metadata pointing at another run's directory")

		// The host stops a run it could not adopt: nothing of it is
		// left, which stop confirms from the run's directory.
		var stop protocol.ExecutorStopResult
		require.NoError(t, f.C.Call(ctx, "executor.stop", protocol.ExecutorStopParams{Executor: x.Name, RunID: "run-gone"}, &stop))
		assert.True(t, stop.Stopped, stop.Evidence)
	})
}

// TestRecoverRefusesMetadataOutsideItsRunsDirectory: metadata that names
// any directory but the run's own under the runs directory (elsewhere,
// through "..", another run's, or the right name made a link to
// elsewhere), or the run's own directory with processes other than those
// it records, is not adopted, so a forged record cannot point the
// executor's stop or forget at files or processes it does not own.
func (x Executor) TestRecoverRefusesMetadataOutsideItsRunsDirectory(t *testing.T) {
	f := NewFixture(t, x, Modes[0])
	rec := f.Run(t, "run-real", ExitInput)
	t.Cleanup(func() { _ = f.Inject(t, "run-real", "0") })
	runs := filepath.Join(f.Dir, "runs")

	elsewhere := t.TempDir()
	linked := rec
	linked.RunID = "run-linked"
	linked.Dir = filepath.Join(runs, "0123456789abcdef01234567")
	forged := map[string]Record{
		"elsewhere":   withDir(rec, elsewhere),
		"dot-dot":     withDir(rec, filepath.Join(runs, "..", "..", filepath.Base(elsewhere))),
		"unclean":     withDir(rec, runs+"/./"+filepath.Base(rec.Dir)),
		"another run": withDir(rec, filepath.Join(runs, "ffffffffffffffffffffffff")),
		"relative":    withDir(rec, filepath.Join("runs", filepath.Base(rec.Dir))),
		"linked":      linked,
	}
	// The directory run-linked's id digests to, made a link out of the
	// runs directory.
	linked.Dir = x.dirOf(t, f, "run-linked")
	require.NoError(t, os.Symlink(elsewhere, linked.Dir))
	forged["linked"] = linked

	forgedPID := rec
	// A live process (this test's), with no start time to tell it apart.
	forgedPID.PID, forgedPID.PGID, forgedPID.Start = os.Getpid(), syscall.Getpgrp(), 0
	forged["its own directory, another process"] = forgedPID

	f.Restart(t, Modes[0])
	for name, r := range forged {
		t.Run(name, func(t *testing.T) {
			raw, err := json.Marshal(r)
			require.NoError(t, err)
			err = f.C.Call(Context(t), "executor.recover", protocol.ExecutorRecoverParams{Executor: x.Name, RunID: "adopt-" + name, Recovery: raw}, nil)
			assert.ErrorIs(t, err, protocol.ErrNotAdoptable)
		})
	}
	// Control: the run's own metadata is adopted.
	raw, err := json.Marshal(rec)
	require.NoError(t, err)
	require.NoError(t, f.C.Call(Context(t), "executor.recover", protocol.ExecutorRecoverParams{Executor: x.Name, RunID: "adopt-real", Recovery: raw}, nil))
}

func withDir(r Record, dir string) Record { r.Dir = dir; return r }

// dirOf is the directory the executor gives the run runID: run it and read
// its metadata, then forget it.
func (x Executor) dirOf(t *testing.T, f *Fixture, runID string) string {
	t.Helper()
	rec := f.Run(t, runID, "exit 0")
	f.Wait(t, runID)
	require.NoError(t, f.C.Call(Context(t), "executor.forget", protocol.ExecutorForgetParams{Executor: x.Name, RunID: runID}, nil))
	return rec.Dir
}

// TestStopUnadopted stops a running job that no executor process holds,
// from the metadata its directory keeps.
func (x Executor) TestStopUnadopted(t *testing.T) {
	x.inEachMode(t, func(t *testing.T, m Mode, f *Fixture) {
		ctx := Context(t)
		rec := f.Run(t, "run-1", ExitInput)
		if f.Proc != nil {
			f.Proc.Kill()
		}
		f.Restart(t, m)
		var stop protocol.ExecutorStopResult
		require.NoError(t, f.C.Call(ctx, "executor.stop", protocol.ExecutorStopParams{Executor: x.Name, RunID: "run-1"}, &stop))
		assert.True(t, stop.Stopped, stop.Evidence)
		assert.True(t, GroupEmpty(rec.PGID))
	})
}

// TestExecutorSuite runs the shared executor suite against the executor,
// hosted both ways.
func (x Executor) TestExecutorSuite(t *testing.T) {
	for _, h := range x.Hostings() {
		t.Run(h.Name, func(t *testing.T) {
			conformance.RunExecutor(t, conformance.ExecutorDriver{
				New:      func(ctx context.Context) (conformance.ExecutorTarget, error) { return h.New(t, ctx) },
				NewStore: func() (runtime.Store, error) { return sqlite.Open(t.TempDir()) },
			})
		})
	}
}

// withRecover is a copy of x's extension whose executor recovers as
// recoverRun says.
func (x Executor) withRecover(recoverRun func(context.Context, *sdk.Host, protocol.ExecutorRecoverParams) (protocol.ExecutorRecoverResult, error)) func() *sdk.Extension {
	return func() *sdk.Extension {
		ext := x.Extension()
		e := ext.Executors[x.Name]
		e.Recover = recoverRun
		ext.Executors[x.Name] = e
		return ext
	}
}

// TestExecutorSuiteCatchesCredulous: an executor that adopts whatever
// metadata it is given fails the suite that passes the real one.
func (x Executor) TestExecutorSuiteCatchesCredulous(t *testing.T) {
	old := conformance.ExecutorCheckTimeout
	conformance.ExecutorCheckTimeout = 3 * time.Second
	t.Cleanup(func() { conformance.ExecutorCheckTimeout = old })
	credulous := x.withRecover(func(context.Context, *sdk.Host, protocol.ExecutorRecoverParams) (protocol.ExecutorRecoverResult, error) {
		return protocol.ExecutorRecoverResult{}, nil
	})
	err := conformance.CheckExecutor(t.Context(), conformance.ExecutorDriver{
		New: func(ctx context.Context) (conformance.ExecutorTarget, error) {
			return x.InProcessTarget(t, ctx, credulous)
		},
		NewStore: func() (runtime.Store, error) { return sqlite.Open(t.TempDir()) },
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "recover_unknown_not_adoptable")
}

// TestPackageChecksInProcess runs the conformance package checks that
// mean something in process against the executor's package (the current
// directory) attached to the real host.
func (x Executor) TestPackageChecksInProcess(t *testing.T) {
	packagetest.RunInProcess(t, ".", x.Extension)
}

// TestPackageChecksAsProcess runs every package check against the
// executor as a subprocess under the real host, this test binary serving
// it (see ServeChild).
func (x Executor) TestPackageChecksAsProcess(t *testing.T) {
	packagetest.RunAsProcess(t, ".", "")
}

// TestInProcessPackageChecksCatchAnAmnesiac: in process, the executor
// lifecycle check fails an executor that refuses to adopt the runs it
// started before its restart.
func (x Executor) TestInProcessPackageChecksCatchAnAmnesiac(t *testing.T) {
	amnesiac := x.withRecover(func(context.Context, *sdk.Host, protocol.ExecutorRecoverParams) (protocol.ExecutorRecoverResult, error) {
		return protocol.ExecutorRecoverResult{}, protocol.Errorf(protocol.CodeNotAdoptable, "remembers nothing")
	})
	state := t.TempDir()
	t.Cleanup(func() { x.KillAllJobs(filepath.Join(state, "executors", x.Name)) })
	d, err := packagetest.Start(Context(t), packagetest.Config{Dir: ".", New: amnesiac, StateDir: state})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	err = conformance.CheckPackageExecutorLifecycle(Context(t), d)
	require.Error(t, err, "the check passed an executor that adopts nothing")
	assert.Contains(t, err.Error(), "did not adopt its run")
}
