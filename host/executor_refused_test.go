package host_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/runtime"
)

// refusingExtension is an executor that answers every executor.recover
// not_adoptable. Its stop confirms a run only when recover was given that
// run ID and the host refuses the run's persistence from then on, so its
// answer carries both checks back over the wire.
func refusingExtension(manifest []byte) *sdk.Extension {
	m, err := protocol.ParseManifest(manifest)
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	var refused []string
	return &sdk.Extension{Manifest: manifest, Executors: map[string]sdk.Executor{m.Name: {
		Run: func(ctx context.Context, h *sdk.Host, p protocol.ExecutorRunParams) (protocol.ExecutorRunResult, error) {
			return protocol.ExecutorRunResult{}, protocol.Errorf(protocol.CodeUnsupported, "runs nothing")
		},
		Wait: func(ctx context.Context, h *sdk.Host, p protocol.ExecutorWaitParams) (protocol.ExecutorWaitResult, error) {
			return protocol.ExecutorWaitResult{}, protocol.Errorf(protocol.CodeNotFound, "no run %q", p.RunID)
		},
		Recover: func(ctx context.Context, h *sdk.Host, p protocol.ExecutorRecoverParams) (protocol.ExecutorRecoverResult, error) {
			mu.Lock()
			refused = append(refused, p.RunID)
			mu.Unlock()
			return protocol.ExecutorRecoverResult{}, protocol.Errorf(protocol.CodeNotAdoptable, "its job is gone")
		},
		Stop: func(ctx context.Context, h *sdk.Host, p protocol.ExecutorStopParams) (protocol.ExecutorStopResult, error) {
			mu.Lock()
			known := slices.Contains(refused, p.RunID)
			mu.Unlock()
			if !known {
				return protocol.ExecutorStopResult{Evidence: "asked to stop a run recover was never given"}, nil
			}
			if err := h.PersistRecovery(ctx, p.RunID, json.RawMessage(`{"late":true}`)); err == nil {
				return protocol.ExecutorStopResult{Evidence: "the host took metadata for a run recover refused"}, nil
			}
			return protocol.ExecutorStopResult{Stopped: true, Evidence: "nothing of it runs"}, nil
		},
	}}}
}

// A run the executor answers not_adoptable is still the executor's to
// stop: the engine's stop-and-retry (spec "Crash and reconnect", the
// executor.* row) calls executor.stop and retries the Work only once the
// stop is confirmed. The stop reaches the executor under the run ID
// recover was given, the run persists nothing more, and once stopped it
// is gone. Before the fix the adapter forgot the run as soon as recover
// failed, so the stop answered not found and the attempt stayed running
// for good (drill executor-not-adoptable).
func TestAdapterStopsARunItCouldNotAdopt(t *testing.T) {
	provides := map[string]any{"executors": []any{map[string]any{"name": "refx", "controls": map[string]any{"stop": true}}}}
	raw := manifestJSON("refx", "sdk-refusing", provides, nil)
	extensionBothWays(t, "refx", raw, refusingExtension, func(t *testing.T, conn host.Conn, fx *fixture) {
		ctx := ctxT(t)
		ex := host.NewRemote(conn).Executor("refx")
		var fp fencedPersister
		_, err := ex.Recover(ctx, runtime.RecoverRequest{ExecutionID: "x-gone", Attempt: 1, Epoch: 2,
			Work: runtime.Work{ID: "w-gone"}, Recovery: json.RawMessage(`{"pgid":4242}`), PersistRecovery: fp.persist})
		require.ErrorIs(t, err, runtime.ErrNotAdoptable)

		assert.NoError(t, ex.(runtime.Stopper).Stop(ctx, "x-gone", 2), "the stop of a run recover refused reaches its executor")
		assert.Empty(t, fp.got, "nothing reached the fenced persistence")
		assert.ErrorIs(t, ex.(runtime.Stopper).Stop(ctx, "x-gone", 2), runtime.ErrNotFound, "once stopped, the refused run is gone")
	})
}
