package shell_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/shell"
	"github.com/open-conduit/open-conduit/protocol"
)

// The job commands. Each blocks on its input until the test says how it
// ends, so no test waits on time.
const (
	echoInput  = `read line; echo "got $line"`          // ends with what it was told
	exitInput  = `read code; exit "$code"`              // exits with the status it is sent
	ignoreTerm = `trap '' TERM; echo ready; read never` // needs SIGKILL
)

func TestRunWaitInject(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			f := newFixture(t, m)
			rec := f.run(t, "run-1", echoInput)
			assert.True(t, alive(rec.PID))
			assert.Equal(t, rec.PID, rec.PGID, "the job leads a process group of its own")

			var live protocol.ExecutorLiveResult
			require.NoError(t, f.c.Call(ctx, "executor.live", protocol.ExecutorLiveParams{Executor: shell.Name, RunID: "run-1"}, &live))
			require.Len(t, live.Outputs, 2, "stdout and stderr, each on its own")
			assert.Equal(t, shell.StdoutFile, live.Outputs[0].Name)
			assert.Equal(t, shell.StderrFile, live.Outputs[1].Name)

			require.NoError(t, f.inject(t, "run-1", "hello"))
			res := f.wait(t, "run-1")
			assert.Equal(t, "succeeded", res.State)
			out, err := os.ReadFile(filepath.Join(rec.Dir, shell.StdoutFile))
			require.NoError(t, err)
			assert.Equal(t, "got hello\n", string(out))

			err = f.c.Call(ctx, "executor.live", protocol.ExecutorLiveParams{Executor: shell.Name, RunID: "run-1"}, nil)
			assert.ErrorIs(t, err, protocol.ErrNotLive, "a settled run has no live output")
			assert.ErrorIs(t, f.inject(t, "run-1", "late"), protocol.ErrConflict)

			f.run(t, "run-2", exitInput)
			require.NoError(t, f.inject(t, "run-2", "3"))
			res = f.wait(t, "run-2")
			assert.Equal(t, "failed", res.State)
			assert.Equal(t, 3, res.ExitCode)

			err = f.c.Call(ctx, "executor.wait", protocol.ExecutorWaitParams{Executor: shell.Name, RunID: "unknown"}, nil)
			assert.ErrorIs(t, err, protocol.ErrNotFound)
			err = f.c.Call(ctx, "executor.run", protocol.ExecutorRunParams{Executor: shell.Name, RunID: "run-3", Config: json.RawMessage(`{"command":7}`)}, nil)
			assert.ErrorIs(t, err, protocol.ErrInvalid, "a config that is not one")

			// Events are injected as JSON lines.
			rec = f.run(t, "run-5", echoInput)
			require.NoError(t, f.c.Call(ctx, "executor.inject", protocol.ExecutorInjectParams{Executor: shell.Name, RunID: "run-5",
				Events: []protocol.Event{{ID: "ev-1", Family: "notes.note", Root: "ev-1"}}}, nil))
			assert.Equal(t, "succeeded", f.wait(t, "run-5").State)
			out, err = os.ReadFile(filepath.Join(rec.Dir, shell.StdoutFile))
			require.NoError(t, err)
			assert.Contains(t, string(out), `got {"id":"ev-1"`)
			err = f.c.Call(ctx, "executor.inject", protocol.ExecutorInjectParams{Executor: shell.Name, RunID: "run-5"}, nil)
			assert.Error(t, err, "nothing to inject")

			// Without a command the job waits to be told its status.
			config, _ := json.Marshal(shell.Config{})
			require.NoError(t, f.c.Call(ctx, "executor.run", protocol.ExecutorRunParams{Executor: shell.Name, RunID: "run-4", Config: config}, nil))
			require.NoError(t, f.inject(t, "run-4", "5"))
			res = f.wait(t, "run-4")
			assert.Equal(t, 5, res.ExitCode)
		})
	}
}

func TestInterrupt(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			f := newFixture(t, m)
			f.run(t, "run-1", exitInput)
			require.NoError(t, f.c.Call(ctx, "executor.interrupt", protocol.ExecutorInterruptParams{Executor: shell.Name, RunID: "run-1"}, nil))
			res := f.wait(t, "run-1")
			assert.Equal(t, "failed", res.State)
			assert.Equal(t, 130, res.ExitCode, "SIGINT ended the command, and its status was recorded")
		})
	}
}

func TestStop(t *testing.T) {
	grace := shell.StopGrace
	shell.StopGrace = 200 * time.Millisecond // the in-process executors read it; a child process keeps the default
	t.Cleanup(func() { shell.StopGrace = grace })
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			f := newFixture(t, m)
			for _, command := range []string{exitInput, ignoreTerm} {
				rec := f.run(t, "run-"+command, command)
				var res protocol.ExecutorStopResult
				require.NoError(t, f.c.Call(ctx, "executor.stop", protocol.ExecutorStopParams{Executor: shell.Name, RunID: "run-" + command, Epoch: 1}, &res))
				assert.True(t, res.Stopped, res.Evidence)
				assert.True(t, groupEmpty(rec.PGID), "stop answered while the job's group still runs: %s", res.Evidence)
				assert.False(t, alive(rec.PID))
				assert.Equal(t, "stopped", f.wait(t, "run-"+command).State)
			}

			// Forget drops a settled run's directory, and refuses a
			// running one.
			rec := f.run(t, "run-forget", exitInput)
			err := f.c.Call(ctx, "executor.forget", protocol.ExecutorForgetParams{Executor: shell.Name, RunID: "run-forget"}, nil)
			assert.ErrorIs(t, err, protocol.ErrConflict)
			require.NoError(t, f.inject(t, "run-forget", "0"))
			f.wait(t, "run-forget")
			require.NoError(t, f.c.Call(ctx, "executor.forget", protocol.ExecutorForgetParams{Executor: shell.Name, RunID: "run-forget"}, nil))
			_, err = os.Stat(rec.Dir)
			assert.True(t, errors.Is(err, os.ErrNotExist), "the run's directory is gone")
		})
	}
}

func TestPersistRefusal(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := newFixture(t, m)
			f.mu.Lock()
			f.refuse = protocol.Errorf(protocol.CodeConflict, "the lease moved on")
			f.mu.Unlock()
			config, _ := json.Marshal(shell.Config{Command: exitInput})
			err := f.c.Call(testContext(t), "executor.run", protocol.ExecutorRunParams{Executor: shell.Name, RunID: "run-1", Config: config}, nil)
			assert.ErrorIs(t, err, protocol.ErrConflict, "the host's refusal comes back as it is")
			entries, err := os.ReadDir(filepath.Join(f.dir, "runs"))
			require.NoError(t, err)
			require.Len(t, entries, 1)
			meta, err := os.ReadFile(filepath.Join(f.dir, "runs", entries[0].Name(), shell.MetaFile))
			require.NoError(t, err)
			var rec shell.Recovery
			require.NoError(t, json.Unmarshal(meta, &rec))
			assert.True(t, groupEmpty(rec.PGID), "nothing keeps running for a run the host refused")
		})
	}
}

// TestRecover restarts the executor (in process: a fresh value; as a
// process: SIGKILL to it) while a job runs, and adopts the job from its
// persisted metadata in the new executor.
func TestRecover(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			f := newFixture(t, m)
			running := f.run(t, "run-running", echoInput)
			finished := f.run(t, "run-finished", exitInput)
			gone := f.run(t, "run-gone", exitInput)
			if f.proc != nil {
				f.proc.kill()
			}
			assert.True(t, alive(running.PID), "the job survives the executor")

			// While no executor holds them, one job finishes and records its
			// status, and another is killed before it could.
			require.NoError(t, writeInput(finished, "4"))
			require.NoError(t, waitGone(ctx, finished.PID))
			killGroup(gone.PGID)
			require.NoError(t, waitGone(ctx, gone.PID))

			f.restart(t, m)
			err := f.c.Call(ctx, "executor.wait", protocol.ExecutorWaitParams{Executor: shell.Name, RunID: "run-running"}, nil)
			assert.ErrorIs(t, err, protocol.ErrNotFound, "a new executor knows no run before it recovers it")

			recoverRun := func(runID string, meta json.RawMessage) error {
				return f.c.Call(ctx, "executor.recover", protocol.ExecutorRecoverParams{Executor: shell.Name, RunID: runID, Recovery: meta}, nil)
			}
			require.NoError(t, recoverRun("run-running", f.recovery("run-running")))
			require.NoError(t, f.inject(t, "run-running", "after the restart"))
			assert.Equal(t, "succeeded", f.wait(t, "run-running").State)
			out, err := os.ReadFile(filepath.Join(running.Dir, shell.StdoutFile))
			require.NoError(t, err)
			assert.Equal(t, "got after the restart\n", string(out))

			require.NoError(t, recoverRun("run-finished", f.recovery("run-finished")))
			res := f.wait(t, "run-finished")
			assert.Equal(t, "failed", res.State)
			assert.Equal(t, 4, res.ExitCode, "the status the job recorded on disk")

			assert.ErrorIs(t, recoverRun("run-gone", f.recovery("run-gone")), protocol.ErrNotAdoptable, "gone without a recorded status")
			assert.ErrorIs(t, recoverRun("run-x", json.RawMessage(`{"garbage":true}`)), protocol.ErrNotAdoptable)
			// Metadata naming a directory that is not its run's own is refused:
			// recovery never reaches outside the executor's runs.
			var forged shell.Recovery
			require.NoError(t, json.Unmarshal(f.recovery("run-finished"), &forged))
			forged.Dir = running.Dir
			forgedJSON, err := json.Marshal(forged)
			require.NoError(t, err)
			assert.ErrorIs(t, recoverRun("run-x", forgedJSON), protocol.ErrNotAdoptable, "metadata pointing at another run's directory")

			// The host stops a run it could not adopt: nothing of it is
			// left, which stop confirms from the run's directory.
			var stop protocol.ExecutorStopResult
			require.NoError(t, f.c.Call(ctx, "executor.stop", protocol.ExecutorStopParams{Executor: shell.Name, RunID: "run-gone"}, &stop))
			assert.True(t, stop.Stopped, stop.Evidence)
		})
	}
}

// TestStopUnadopted stops a running job that no executor process holds,
// from the metadata its directory keeps.
func TestStopUnadopted(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			f := newFixture(t, m)
			rec := f.run(t, "run-1", exitInput)
			if f.proc != nil {
				f.proc.kill()
			}
			f.restart(t, m)
			var stop protocol.ExecutorStopResult
			require.NoError(t, f.c.Call(ctx, "executor.stop", protocol.ExecutorStopParams{Executor: shell.Name, RunID: "run-1"}, &stop))
			assert.True(t, stop.Stopped, stop.Evidence)
			assert.True(t, groupEmpty(rec.PGID))
		})
	}
}
