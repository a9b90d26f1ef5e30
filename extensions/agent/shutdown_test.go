package agent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// TestShutdownLeavesRunsToTheNextProcess: shutdown ends the process's
// runs, and the wait of a run it cut short is answered shutting_down, not
// with a failed result, so the attempt goes on in the next agent process
// (which adopts it); a run that had succeeded keeps its result.
func TestShutdownLeavesRunsToTheNextProcess(t *testing.T) {
	a := &agent{runs: map[string]*run{}, dir: t.TempDir()}
	start := func(runID string, script []Step) *run {
		r, err := a.claim(runID)
		require.NoError(t, err)
		go a.start(r, sdk.Toolbelt{}, protocol.ExecutorRunParams{Executor: Name, RunID: runID}, script)
		return r
	}
	done := start("run-done", nil)
	<-done.done
	start("run-thinking", []Step{{Think: "10m"}})
	a.stopAll()

	_, err := a.wait(t.Context(), nil, protocol.ExecutorWaitParams{Executor: Name, RunID: "run-thinking"})
	assert.ErrorIs(t, err, protocol.ErrShuttingDown)
	res, err := a.wait(t.Context(), nil, protocol.ExecutorWaitParams{Executor: Name, RunID: "run-done"})
	require.NoError(t, err)
	assert.Equal(t, VerdictSucceeded, res.State)
}
