package runner_test

import (
	"encoding/json"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/internal/executortest"
	"github.com/open-conduit/open-conduit/protocol"
)

// The host adopts a run under a new run ID, and when executor.recover
// refuses it (not_adoptable) it stops that run ID before it retries the
// Work. A job whose leader is gone, having recorded no exit status, is not
// adoptable, but the rest of its process group may still run: the stop
// under the new run ID must end the group the refused metadata names, and
// say so only once none of it is left. Before, the stop knew no run of
// the new ID, answered stopped ("no job of run was started here") and the
// job's other processes went on beside the retry.
func TestStopAfterARefusedRecoverEndsTheGroup(t *testing.T) {
	for _, m := range executortest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			ctx := executortest.Context(t)
			f := executortest.NewFixture(t, executor, m)
			rec := f.Run(t, "run-first", "sleep 300")
			require.NoError(t, syscall.Kill(rec.PID, syscall.SIGKILL), "the job's leader only")
			require.NoError(t, executortest.WaitGone(ctx, rec.PID))
			require.False(t, executortest.GroupEmpty(rec.PGID), "the job's command still runs in its group")

			f.Restart(t, m)
			err := f.C.Call(ctx, "executor.recover", protocol.ExecutorRecoverParams{Executor: executor.Name, RunID: "run-adopted",
				Execution: protocol.Execution{ID: rec.ExecutionID, WorkID: rec.WorkID, Attempt: 1, Executor: executor.Name},
				Recovery:  f.Recovery("run-first")}, nil)
			require.ErrorIs(t, err, protocol.ErrNotAdoptable, "its leader is gone with no exit status")

			var stop protocol.ExecutorStopResult
			require.NoError(t, f.C.Call(ctx, "executor.stop", protocol.ExecutorStopParams{Executor: executor.Name, RunID: "run-adopted"}, &stop))
			assert.True(t, stop.Stopped, stop.Evidence)
			assert.True(t, executortest.GroupEmpty(rec.PGID), "the stop confirmed a group that still runs: %s", stop.Evidence)
			assert.Contains(t, stop.Evidence, "process group", "the evidence is the group's")

			// A run ID no recover was given still has nothing to stop.
			require.NoError(t, f.C.Call(ctx, "executor.stop", protocol.ExecutorStopParams{Executor: executor.Name, RunID: "run-unknown"}, &stop))
			assert.True(t, stop.Stopped)
			raw, _ := json.Marshal(stop)
			assert.Contains(t, string(raw), "no job")
		})
	}
}
