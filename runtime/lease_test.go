package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/runtimetest"
)

const testLeaseTTL = 30 * time.Minute

func leaseOf(t *testing.T, h *harness, name string) runtime.Lease {
	t.Helper()
	var l runtime.Lease
	h.view(t, func(r runtime.ReadTx) error {
		var err error
		l, err = r.Lease(name)
		return err
	})
	return l
}

// waitDrained waits for the engine's observers to end, failing the test
// (rather than hanging it) if one never does.
func waitDrained(t *testing.T, h *harness) {
	t.Helper()
	done := make(chan struct{})
	go func() { h.engine.Drain(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("an observer is still observing")
	}
}

// An observer renews its attempt's lease every third of the TTL while the
// run is alive, so after several TTLs the lease is still held and another
// holder cannot take it without superseding it.
func TestObserverRenewsTheLeaseWhileTheRunIsAlive(t *testing.T) {
	ctx := context.Background()
	ex := newFakeExecutor()
	cfg := schedulerConfig(ex)
	cfg.LeaseTTL = testLeaseTTL
	h := newHarness(t, cfg)
	w := newWork(t, h, "1", "k1")
	start(t, h)
	req := <-ex.started
	x := h.executions(t, w.ID)[0]
	assert.Equal(t, t0.Add(testLeaseTTL), leaseOf(t, h, x.Lease).ExpiresAt)

	for i := 1; i <= 9; i++ { // three TTLs
		h.clock.Advance(testLeaseTTL / 3)
		l := leaseOf(t, h, x.Lease)
		require.Equal(t, h.clock.Now().Add(testLeaseTTL), l.ExpiresAt, "renewal %d", i)
		require.Equal(t, x.Epoch, l.Epoch, "a renewal keeps the epoch")
	}
	err := h.store.Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.AcquireLease(runtime.LeaseRequest{Name: x.Lease, Holder: "other", Now: h.clock.Now(), TTL: time.Minute})
		return err
	})
	require.ErrorIs(t, err, runtime.ErrConflict, "the renewed lease is live")

	ex.Succeed(req.ExecutionID)
	waitDrained(t, h)
	assert.Equal(t, runtime.WorkDone, h.work(t, w.ID).State)
	assert.True(t, leaseOf(t, h, x.Lease).Released)
	pending := h.clock.Pending()
	h.clock.Advance(testLeaseTTL)
	assert.Equal(t, pending, h.clock.Pending(), "renewing stopped with the observation")
	assert.Empty(t, h.errs.all())
}

// A renewal that finds the lease superseded ends the observation: the
// run's Wait is cancelled, the pool slot freed, and the run's end, once it
// comes, writes nothing for the superseded attempt.
func TestALostLeaseEndsTheObservation(t *testing.T) {
	ctx := context.Background()
	ex := newFakeExecutor()
	cfg := schedulerConfig(ex)
	cfg.LeaseTTL = testLeaseTTL
	h := newHarness(t, cfg)
	w := newWork(t, h, "1", "k1")
	start(t, h)
	req := <-ex.started
	x := h.executions(t, w.ID)[0]
	require.Equal(t, 1, h.engine.Running(runtime.PoolJob))

	// Another holder takes the run over (as an adopting daemon would).
	require.NoError(t, h.store.Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.AcquireLease(runtime.LeaseRequest{Name: x.Lease, Holder: "other", Now: h.clock.Now(), TTL: time.Hour, Supersede: true})
		return err
	}))
	h.clock.Advance(testLeaseTTL / 3)
	waitDrained(t, h)
	assert.Equal(t, 0, h.engine.Running(runtime.PoolJob), "the observation ended and freed its slot")
	errs := h.errs.all()
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], runtime.ErrConflict)
	assert.Contains(t, errs[0].Error(), "lease was lost")

	ex.Succeed(req.ExecutionID)
	waitDrained(t, h)
	got := h.executions(t, w.ID)
	require.Len(t, got, 1)
	assert.Equal(t, runtime.ExecutionRunning, got[0].State, "nothing was written for the superseded attempt")
	assert.Equal(t, x.Epoch, got[0].Epoch)
	assert.Equal(t, runtime.WorkRunning, h.work(t, w.ID).State)
	assert.Equal(t, int64(2), leaseOf(t, h, x.Lease).Epoch, "the other holder keeps the lease")
	assert.Len(t, h.errs.all(), 1, "no settle was attempted")
}

// fakeIssuer issues a token naming the execution and epoch.
type fakeIssuer struct{}

func (fakeIssuer) Issue(executionID string, epoch int64) (runtime.RunToolbelt, error) {
	return runtime.RunToolbelt{Endpoint: "unix:/toolbelt.sock", Token: fmt.Sprintf("%s@%d", executionID, epoch)}, nil
}

// A run gets its binding's executor config and, when the binding grants
// the toolbelt, a token for its epoch; a recovery under a new epoch gets a
// new token, and the Authority of the old epoch is refused.
func TestRunsCarryTheBindingConfigAndAToolbeltForTheirEpoch(t *testing.T) {
	ctx := context.Background()
	ex := newFakeExecutor()
	cfg := schedulerConfig(ex)
	cfg.Toolbelt = fakeIssuer{}
	cfg.Bindings = map[string]runtime.Binding{"b": {Executor: "fake", Pool: runtime.PoolJob, Toolbelt: true,
		Operations: []string{"op.a"}, Config: json.RawMessage(`{"command":"echo hi"}`)}}
	old := newHarness(t, cfg)
	w := newWork(t, old, "1", "k1")
	start(t, old)
	req := <-ex.started
	assert.JSONEq(t, `{"command":"echo hi"}`, string(req.Config))
	assert.Equal(t, runtime.RunToolbelt{Endpoint: "unix:/toolbelt.sock", Token: req.ExecutionID + "@1"}, req.Toolbelt)
	a, err := old.engine.AuthorityAt(ctx, req.ExecutionID, 1)
	require.NoError(t, err)
	assert.Equal(t, []string{"op.a"}, a.Operations)
	assert.Equal(t, w.ID, a.WorkID)

	cfg.Store, cfg.Holder = old.store, "restarted"
	fresh := attach(t, cfg, old.clock)
	_, err = fresh.engine.Adopt(ctx)
	require.NoError(t, err)
	rec := <-ex.recovered
	assert.JSONEq(t, `{"command":"echo hi"}`, string(rec.Config))
	assert.Equal(t, req.ExecutionID+"@2", rec.Toolbelt.Token)
	_, err = fresh.engine.AuthorityAt(ctx, req.ExecutionID, 1)
	assert.ErrorIs(t, err, runtime.ErrUnauthorized, "the token of the superseded epoch is dead")
	_, err = fresh.engine.AuthorityAt(ctx, req.ExecutionID, 0)
	assert.ErrorIs(t, err, runtime.ErrUnauthorized, "an epoch is required")
	_, err = fresh.engine.AuthorityAt(ctx, req.ExecutionID, 2)
	assert.NoError(t, err)

	ex.Succeed(req.ExecutionID)
	waitDrained(t, old)
	waitDrained(t, fresh)
	_, err = fresh.engine.AuthorityAt(ctx, req.ExecutionID, 2)
	assert.ErrorIs(t, err, runtime.ErrUnauthorized, "an ended execution has no authority")
}

// A binding without the toolbelt gives its runs none, issuer or not.
func TestABindingWithoutTheToolbeltIssuesNone(t *testing.T) {
	ex := newFakeExecutor()
	cfg := schedulerConfig(ex)
	cfg.Toolbelt = fakeIssuer{}
	h := newHarness(t, cfg)
	newWork(t, h, "1", "k1")
	start(t, h)
	req := <-ex.started
	assert.Equal(t, runtime.RunToolbelt{}, req.Toolbelt)
	assert.Empty(t, req.Config)
	ex.Succeed(req.ExecutionID)
	waitDrained(t, h)
}

// flakyStore fails the transactions it is told to, as a busy store would.
type flakyStore struct {
	runtime.Store
	fail atomic.Int32 // transactions left to fail
}

func (s *flakyStore) Transact(ctx context.Context, fn func(tx runtime.Tx) error) error {
	if s.fail.Add(-1) >= 0 {
		return errors.New("database is locked")
	}
	s.fail.Store(0)
	return s.Store.Transact(ctx, fn)
}

// A renewal that fails for another reason than a superseded lease is
// reported and tried again at the next interval; the observation goes on.
func TestAFailedRenewalIsRetried(t *testing.T) {
	ex := newFakeExecutor()
	cfg := schedulerConfig(ex)
	cfg.LeaseTTL = testLeaseTTL
	clock := runtimetest.NewFakeClock(t0)
	store := &flakyStore{Store: openStore(t, clock)}
	cfg.Store = store
	h := attach(t, cfg, clock)
	w := newWork(t, h, "1", "k1")
	start(t, h)
	req := <-ex.started
	x := h.executions(t, w.ID)[0]

	store.fail.Store(1)
	h.clock.Advance(testLeaseTTL / 3)
	assert.Equal(t, t0.Add(testLeaseTTL), leaseOf(t, h, x.Lease).ExpiresAt, "the renewal failed")
	errs := h.errs.all()
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "renew lease: database is locked")
	assert.Equal(t, 1, h.engine.Running(runtime.PoolJob), "the observation goes on")

	h.clock.Advance(testLeaseTTL / 3)
	assert.Equal(t, h.clock.Now().Add(testLeaseTTL), leaseOf(t, h, x.Lease).ExpiresAt, "the next renewal succeeded")
	ex.Succeed(req.ExecutionID)
	waitDrained(t, h)
	assert.Equal(t, runtime.WorkDone, h.work(t, w.ID).State)
	assert.Len(t, h.errs.all(), 1)
}
