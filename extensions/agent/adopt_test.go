package agent_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/agent"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// recordingHost is a fake host that keeps each execution.persist_recovery,
// or refuses them with refuse.
type recordingHost struct {
	*sdktest.Host
	mu        sync.Mutex
	persisted map[string]json.RawMessage
	refuse    error
}

func newRecordingHost() *recordingHost {
	h := &recordingHost{Host: sdktest.New(), persisted: map[string]json.RawMessage{}}
	h.Override = func(ctx context.Context, method string, params any) (any, bool, error) {
		if method != "execution.persist_recovery" {
			return nil, false, nil
		}
		raw, ok := params.(json.RawMessage)
		if !ok {
			var err error
			if raw, err = json.Marshal(params); err != nil {
				return nil, true, err
			}
		}
		var p protocol.ExecutionPersistRecoveryParams
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, true, err
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.refuse != nil {
			return nil, true, h.refuse
		}
		h.persisted[p.RunID] = p.Recovery
		return protocol.ExecutionPersistRecoveryResult{}, true, nil
	}
	return h
}

func (h *recordingHost) recovery(runID string) json.RawMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.persisted[runID]
}

// startAgent is a fresh agent process, attached in process to host and
// initialized on stateDir.
func startAgent(t *testing.T, host *recordingHost, stateDir string) sdk.Caller {
	t.Helper()
	c, err := sdk.Attach(agent.Extension(), host)
	require.NoError(t, err)
	require.NoError(t, c.Call(t.Context(), "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1},
		Host: protocol.HostInfo{Name: "open-conduit", Version: "test"}, StateDir: stateDir}, nil))
	return c
}

func runParams(runID, script string) protocol.ExecutorRunParams {
	return protocol.ExecutorRunParams{Executor: agent.Name, RunID: runID,
		Work:      protocol.Work{ID: "work-" + runID, ScopeID: "team", Kind: "review", State: "running"},
		Execution: protocol.Execution{ID: "exec-" + runID, WorkID: "work-" + runID, Attempt: 1, Executor: agent.Name, State: "running"},
		Config:    json.RawMessage(script)}
}

func wait(t *testing.T, c sdk.Caller, runID string) (protocol.ExecutorWaitResult, error) {
	var res protocol.ExecutorWaitResult
	err := c.Call(t.Context(), "executor.wait", protocol.ExecutorWaitParams{Executor: agent.Name, RunID: runID}, &res)
	return res, err
}

// TestRecoverFollowsTheScriptAgain: a run persists its Recovery before it
// starts; a restarted agent adopts it from that metadata and follows its
// script again to the same end; metadata of no agent run, of another
// attempt, or calling operations without a toolbelt is not_adoptable; a
// run whose persistence the host refuses never starts.
func TestRecoverFollowsTheScriptAgain(t *testing.T) {
	host, dir := newRecordingHost(), t.TempDir()
	first := startAgent(t, host, dir)
	p := runParams("run-1", `{"script":[{"think":"1ms"},{"fail":"followed to the end"}]}`)
	var started protocol.ExecutorRunResult
	require.NoError(t, first.Call(t.Context(), "executor.run", p, &started))
	meta := host.recovery("run-1")
	require.NotEmpty(t, meta, "the run persisted its recovery metadata")
	assert.JSONEq(t, string(meta), string(started.Recovery), "and answered it")

	second := startAgent(t, host, dir)
	_, err := wait(t, second, "run-1")
	assert.ErrorIs(t, err, protocol.ErrNotFound, "a new agent knows no run before it adopts it")
	adopt := func(runID string, p protocol.ExecutorRunParams, meta json.RawMessage) error {
		return second.Call(t.Context(), "executor.recover", protocol.ExecutorRecoverParams{Executor: agent.Name, RunID: runID,
			Work: p.Work, Execution: p.Execution, Recovery: meta, Config: p.Config}, nil)
	}
	require.NoError(t, adopt("run-1", p, meta))
	res, err := wait(t, second, "run-1")
	require.NoError(t, err)
	assert.Equal(t, "failed", res.State)
	assert.Contains(t, res.Error, "followed to the end", "the adopted run followed the persisted script")
	require.NoError(t, adopt("run-1", p, meta), "adopting a run it holds is a no-op")

	otherAttempt := p
	otherAttempt.Execution.ID = "exec-other"
	var calling protocol.ExecutorRunParams
	callingMeta, err := json.Marshal(agent.Recovery{RunID: "run-3", WorkID: "work-run-3", ExecutionID: "exec-run-3",
		Config: json.RawMessage(`{"script":[{"call":"notes.add"}]}`)})
	require.NoError(t, err)
	calling.Work.ID, calling.Execution.ID = "work-run-3", "exec-run-3"
	for name, c := range map[string]struct {
		p    protocol.ExecutorRunParams
		meta string
	}{
		"none":               {p, ``},
		"no agent run's":     {p, `{"certify":"nothing was started"}`},
		"not a script":       {p, `{"run_id":"run-1","work_id":"work-run-1","execution_id":"exec-run-1","config":{"script":[{}]}}`},
		"another attempt's":  {otherAttempt, string(meta)},
		"calls, no toolbelt": {calling, string(callingMeta)},
	} {
		t.Run(name, func(t *testing.T) {
			assert.ErrorIs(t, adopt("run-x-"+name, c.p, json.RawMessage(c.meta)), protocol.ErrNotAdoptable)
		})
	}

	host.mu.Lock()
	host.refuse = protocol.Errorf(protocol.CodeConflict, "superseded")
	host.mu.Unlock()
	assert.ErrorIs(t, second.Call(t.Context(), "executor.run", runParams("run-2", `{"script":[]}`), nil), protocol.ErrConflict)
	_, err = wait(t, second, "run-2")
	assert.ErrorIs(t, err, protocol.ErrNotFound, "a run the host holds no metadata of never started")
}
