package host_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/runtime"
)

// paramsRecorder is an SDK executor that records what executor.run,
// executor.recover and executor.resume were sent.
type paramsRecorder struct {
	mu      sync.Mutex
	run     protocol.ExecutorRunParams
	recover protocol.ExecutorRecoverParams
	resume  protocol.ExecutorResumeParams
}

func (p *paramsRecorder) extension(raw []byte) *sdk.Extension {
	return &sdk.Extension{Manifest: raw, Executors: map[string]sdk.Executor{"tbx": {
		Run: func(_ context.Context, _ *sdk.Host, r protocol.ExecutorRunParams) (protocol.ExecutorRunResult, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.run = r
			return protocol.ExecutorRunResult{}, nil
		},
		Wait: func(context.Context, *sdk.Host, protocol.ExecutorWaitParams) (protocol.ExecutorWaitResult, error) {
			return protocol.ExecutorWaitResult{State: "succeeded"}, nil
		},
		Recover: func(_ context.Context, _ *sdk.Host, r protocol.ExecutorRecoverParams) (protocol.ExecutorRecoverResult, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.recover = r
			return protocol.ExecutorRecoverResult{}, nil
		},
		Resume: func(_ context.Context, _ *sdk.Host, r protocol.ExecutorResumeParams) (protocol.ExecutorResumeResult, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.resume = r
			return protocol.ExecutorResumeResult{}, nil
		},
	}}}
}

// The executor adapter sends the binding's executor config and the
// attempt's toolbelt endpoint and token with executor.run, and the new
// epoch's with executor.recover and executor.resume.
func TestAdapterExecutorCarriesConfigAndToolbelt(t *testing.T) {
	raw := manifestJSON("tbx", "none", map[string]any{"executors": []any{map[string]any{"name": "tbx",
		"labels": map[string]any{"resume": true, "toolbelt": "sdk"}}}}, nil)
	m, err := protocol.ParseManifest(raw)
	require.NoError(t, err)
	fx := newFixture(t)
	svc := host.NewService(host.ServiceConfig{Manifest: m, Store: fx.store})
	rec := &paramsRecorder{}
	ext, err := sdk.Attach(rec.extension(raw), svc)
	require.NoError(t, err)
	att, err := host.Attach(ctxT(t), ext, svc, t.TempDir(), protocol.ConfigureParams{})
	require.NoError(t, err)
	ex := host.NewRemote(att).Executor("tbx")
	ctx := ctxT(t)
	var p fencedPersister
	config := json.RawMessage(`{"command":"echo hi"}`)

	req := runRequest("w1", &p)
	req.Config, req.Toolbelt = config, runtime.RunToolbelt{Endpoint: "unix:/s/toolbelt.sock", Token: "tok-1"}
	_, err = ex.Run(ctx, req)
	require.NoError(t, err)
	rec.mu.Lock()
	assert.JSONEq(t, string(config), string(rec.run.Config))
	assert.Equal(t, "unix:/s/toolbelt.sock", rec.run.Endpoint)
	assert.Equal(t, "tok-1", rec.run.Token)
	assert.Equal(t, sdk.Toolbelt{Endpoint: "unix:/s/toolbelt.sock", Token: "tok-1"}, sdk.ToolbeltOf(rec.run))
	rec.mu.Unlock()

	_, err = ex.Recover(ctx, runtime.RecoverRequest{ExecutionID: "x-w1", Attempt: 1, Epoch: 2, Work: req.Work,
		Recovery: json.RawMessage(`{"r":1}`), PersistRecovery: p.persist, Config: config,
		Toolbelt: runtime.RunToolbelt{Endpoint: "unix:/s/toolbelt.sock", Token: "tok-2"}})
	require.NoError(t, err)
	rec.mu.Lock()
	assert.JSONEq(t, string(config), string(rec.recover.Config))
	assert.Equal(t, "tok-2", rec.recover.Token, "the new epoch's token")
	rec.mu.Unlock()

	req2 := runRequest("w2", &p)
	req2.ExecutionID, req2.Attempt, req2.Epoch = "x-w2-2", 2, 3
	req2.Config, req2.Toolbelt = config, runtime.RunToolbelt{Endpoint: "unix:/s/toolbelt.sock", Token: "tok-3"}
	_, err = ex.(runtime.Resumer).Resume(ctx, req2, json.RawMessage(`{"r":2}`))
	require.NoError(t, err)
	rec.mu.Lock()
	assert.Equal(t, "tok-3", rec.resume.Token)
	assert.Equal(t, "x-w2-2", rec.resume.Execution.ID)
	assert.JSONEq(t, string(config), string(rec.resume.Config))
	rec.mu.Unlock()
}
