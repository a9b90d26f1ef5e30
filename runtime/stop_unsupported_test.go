package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

// stoplessExecutor is an executor whose Stop is ErrUnsupported, as the
// host's adapter answers for one that declares no stop control (the
// agent, whose runs end with its process).
type stoplessExecutor struct {
	*fakeExecutor
	stops chan string
}

func (s stoplessExecutor) Stop(_ context.Context, executionID string, _ int64) error {
	s.stops <- executionID
	return fmt.Errorf("%w: executor fake does not declare stop", runtime.ErrUnsupported)
}

// A run that cannot be adopted, of an executor that cannot stop, is taken
// as ended: stopped and retried, as one without Stop at all. Before, the
// unsupported stop was a failed stop, and the attempt stayed running for
// good (every agent run a daemon kill interrupted).
func TestNotAdoptableWithoutStopRetries(t *testing.T) {
	ex := newFakeExecutor()
	ex.persist = false // nothing to adopt from
	sl := stoplessExecutor{fakeExecutor: ex, stops: make(chan string, 10)}
	cfg := schedulerConfig(ex)
	cfg.Executors = map[string]runtime.Executor{"fake": sl}
	h := newHarness(t, cfg)
	w := newWork(t, h, "1", "k1")
	start(t, h)
	req := <-ex.started

	ex.Crash()
	assert.Equal(t, req.ExecutionID, <-sl.stops, "the stop was asked")
	h.engine.Drain()
	xs := h.executions(t, w.ID)
	require.Len(t, xs, 1)
	assert.Equal(t, runtime.ExecutionStopped, xs[0].State)
	assert.ErrorContains(t, errors.New(xs[0].Error), "not adoptable")
	assert.Equal(t, runtime.WorkPending, h.work(t, w.ID).State, "retried, not left running")

	h.clock.Advance(time.Minute)
	require.Len(t, start(t, h), 1)
	next := <-ex.started
	assert.Equal(t, 2, next.Attempt)
}
