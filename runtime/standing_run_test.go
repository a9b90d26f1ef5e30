package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/open-conduit/open-conduit/runtime"
)

// unresumableExecutor answers Resume as the host's adapter does for an
// executor whose manifest does not declare resume: unsupported.
type unresumableExecutor struct {
	*fakeExecutor
	refused chan json.RawMessage
}

func (r *unresumableExecutor) Resume(ctx context.Context, req runtime.RunRequest, previous json.RawMessage) (runtime.RunHandle, error) {
	r.refused <- previous
	return nil, fmt.Errorf("%w: executor fake does not declare resume", runtime.ErrUnsupported)
}

// TestStandingWorkRunsAgainWithoutResume: standing Work whose executor
// refuses resume takes its new input in a new run, rather than failing
// every attempt after the first (a scheduled job on a plain executor).
func TestStandingWorkRunsAgainWithoutResume(t *testing.T) {
	ex := &unresumableExecutor{fakeExecutor: newFakeExecutor(), refused: make(chan json.RawMessage, 10)}
	cfg := schedulerConfig(ex.fakeExecutor)
	cfg.Executors = map[string]runtime.Executor{"fake": ex}
	cfg.WorkKinds = map[string]runtime.WorkKindPolicy{"task": kindPolicy{standing: true}}
	h := newHarness(t, cfg)
	w := newWork(t, h, "1", "k")
	start(t, h)
	first := <-ex.started
	ex.Succeed(first.ExecutionID)
	h.engine.Drain()
	accept(t, h, testEnvelope("src", "2", "s1", payload{Match: true, Key: "k"}))
	routeAll(t, h)
	start(t, h)
	assert.JSONEq(t, `{"run":"`+first.ExecutionID+`"}`, string(<-ex.refused), "resume was asked first")
	var second runtime.RunRequest
	select {
	case second = <-ex.started: // Run is called within the start
	default:
		h.engine.Drain()
		xs := h.executions(t, w.ID)
		t.Fatalf("no second run; its attempt ended %s: %s", xs[len(xs)-1].State, xs[len(xs)-1].Error)
	}
	assert.NotEqual(t, first.ExecutionID, second.ExecutionID)
	ex.Succeed(second.ExecutionID)
	h.engine.Drain()
	xs := h.executions(t, w.ID)
	if assert.Len(t, xs, 2) {
		assert.Equal(t, runtime.ExecutionSucceeded, xs[1].State, "the second run ran: %s", xs[1].Error)
	}
}
