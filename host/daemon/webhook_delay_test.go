package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

// fakeTimer is the acceptor's clock for its commit delay: each wait it
// arms is announced on armed (with its bound), and ends when the test
// sends on fire.
type fakeTimer struct {
	armed chan time.Duration
	fire  chan time.Time
}

func newFakeTimer() *fakeTimer {
	return &fakeTimer{armed: make(chan time.Duration, 16), fire: make(chan time.Time)}
}

func (f *fakeTimer) timer(d time.Duration) (<-chan time.Time, func() bool) {
	f.armed <- d
	return f.fire, func() bool { return true }
}

// within fails the test when ch yields nothing in a long while: a bound
// on a failure, not a way to wait for something.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		require.FailNow(t, "nothing came: "+what)
		var zero T
		return zero
	}
}

// delayTest is a running acceptor on a real store whose mean commit is
// mean, with clock as its timer.
func delayTest(t *testing.T, mean time.Duration, timer func(time.Duration) (<-chan time.Time, func() bool)) *groupAcceptor {
	s, eng := newAcceptTest(t)
	g := newIdleAcceptor(s, eng, timer)
	g.meanCommit = int64(mean)
	startGroupAcceptor(g)
	t.Cleanup(g.close)
	return g
}

type acceptResult struct {
	events []runtime.Event
	err    error
}

// acceptAsync has a counted request deliver envs, its result on the
// channel returned.
func acceptAsync(t *testing.T, a *arrival, envs ...runtime.Envelope) <-chan acceptResult {
	ch := make(chan acceptResult, 1)
	go func() {
		evs, err := a.accept(t.Context(), envs)
		ch <- acceptResult{evs, err}
	}()
	return ch
}

// One sender at a time: nothing else is in flight when its delivery is
// committed, so no commit waits (counted by the acceptor, not timed). A
// timer that has already fired keeps a wrongly armed wait from hanging the
// test: it shows in the counters instead.
func TestGroupAcceptorLoneDeliveryNeverWaits(t *testing.T) {
	var armed int
	fired := func(time.Duration) (<-chan time.Time, func() bool) {
		armed++
		ch := make(chan time.Time, 1)
		ch <- time.Time{}
		return ch, func() bool { return false }
	}
	g := delayTest(t, time.Millisecond, fired)
	const n = 20
	for i := range n {
		a := g.arriving()
		evs, err := a.accept(t.Context(), []runtime.Envelope{env(fmt.Sprintf("lone-%d", i), `{}`)})
		a.gone()
		require.NoError(t, err)
		require.Len(t, evs, 1)
	}
	assert.EqualValues(t, n, g.commits.Load())
	assert.EqualValues(t, 0, g.waits.Load(), "a commit waited with nothing in flight")
	assert.Zero(t, armed)
	assert.EqualValues(t, 0, g.inflight.Load())
}

// A delivery queued while another request is in flight waits for it, up
// to half the mean commit, and the two share one commit.
func TestGroupAcceptorWaitsForADeliveryInFlight(t *testing.T) {
	ft := newFakeTimer()
	g := delayTest(t, time.Millisecond, ft.timer)
	first, second := g.arriving(), g.arriving()
	r1 := acceptAsync(t, &first, env("first", `{}`))
	assert.Equal(t, 500*time.Microsecond, within(t, ft.armed, "the wait for the second"))
	r2 := acceptAsync(t, &second, env("second", `{}`))
	for _, r := range []<-chan acceptResult{r1, r2} {
		res := within(t, r, "an answer")
		require.NoError(t, res.err)
		assert.Len(t, res.events, 1)
	}
	assert.EqualValues(t, 1, g.commits.Load(), "one commit for both")
	assert.EqualValues(t, 2, g.delivered.Load())
	assert.EqualValues(t, 1, g.waits.Load())
	assert.EqualValues(t, 1, g.joined.Load())
	assert.EqualValues(t, 0, g.waitTimeouts.Load())
}

// The wait ends at its bound (capped at maxCommitDelay) when the request
// in flight does not come, and the group commits without it.
func TestGroupAcceptorWaitIsBounded(t *testing.T) {
	ft := newFakeTimer()
	g := delayTest(t, 10*time.Millisecond, ft.timer)
	first, slow := g.arriving(), g.arriving()
	defer slow.gone()
	r1 := acceptAsync(t, &first, env("first", `{}`))
	assert.Equal(t, maxCommitDelay, within(t, ft.armed, "the wait for the slow one"))
	ft.fire <- time.Time{}
	res := within(t, r1, "an answer")
	require.NoError(t, res.err)
	assert.Len(t, res.events, 1)
	assert.EqualValues(t, 1, g.commits.Load())
	assert.EqualValues(t, 1, g.waitTimeouts.Load())
	assert.EqualValues(t, 0, g.joined.Load())
}

// A request in flight that gives up (its webhook.handle failed) ends the
// wait for it at once, bound or not.
func TestGroupAcceptorWaitEndsWhenTheOtherGivesUp(t *testing.T) {
	ft := newFakeTimer()
	g := delayTest(t, time.Millisecond, ft.timer)
	first, failing := g.arriving(), g.arriving()
	r1 := acceptAsync(t, &first, env("first", `{}`))
	within(t, ft.armed, "the wait for the failing one")
	failing.gone()
	failing.gone() // once is enough
	res := within(t, r1, "an answer")
	require.NoError(t, res.err)
	assert.EqualValues(t, 1, g.commits.Load())
	assert.EqualValues(t, 1, g.waits.Load())
	assert.EqualValues(t, 0, g.waitTimeouts.Load(), "ended by the give-up, not the bound")
	assert.EqualValues(t, 0, g.inflight.Load())
}

// Before any commit has been measured there is no bound to wait for, so
// the first delivery commits at once even with others in flight.
func TestGroupAcceptorFirstCommitDoesNotWait(t *testing.T) {
	ft := newFakeTimer()
	g := delayTest(t, 0, ft.timer)
	first, other := g.arriving(), g.arriving()
	defer other.gone()
	res := within(t, acceptAsync(t, &first, env("first", `{}`)), "an answer")
	require.NoError(t, res.err)
	assert.EqualValues(t, 0, g.waits.Load())
	assert.Empty(t, ft.armed)
}

// hookStore calls during at the start of each transaction's work.
type hookStore struct {
	runtime.Store
	during func()
}

func (s *hookStore) Transact(ctx context.Context, fn func(runtime.Tx) error) error {
	return s.Store.Transact(ctx, func(tx runtime.Tx) error {
		s.during()
		return fn(tx)
	})
}

// A delivery queued while a group's transaction does its work joins that
// transaction and shares its commit.
func TestGroupAcceptorLateJoinerSharesTheCommit(t *testing.T) {
	s, eng := newAcceptTest(t)
	hs := &hookStore{Store: s}
	g := newIdleAcceptor(hs, eng, realTimer) // no committer: commit is called here
	late := &delivery{envs: []runtime.Envelope{env("late", `{}`)}, done: make(chan struct{})}
	hs.during = func() {
		hs.during = func() {}
		g.queue <- late
	}
	first := &delivery{envs: []runtime.Envelope{env("first", `{}`)}, done: make(chan struct{})}
	g.commit([]*delivery{first})
	require.NoError(t, first.err)
	select {
	case <-late.done:
	default:
		require.FailNow(t, "the late delivery was left queued")
	}
	require.NoError(t, late.err)
	assert.Len(t, late.events, 1)
	assert.EqualValues(t, 1, g.commits.Load())
	assert.EqualValues(t, 2, g.delivered.Load())
	assert.EqualValues(t, 1, g.lateJoined.Load())
	assert.Equal(t, 2, countEvents(t, s))
}

// A late joiner that is refused is refused alone: the group falls back to
// one transaction each, late joiner included.
func TestGroupAcceptorLateJoinerRefusedAlone(t *testing.T) {
	s, eng := newAcceptTest(t)
	_, err := eng.Accept(t.Context(), env("taken", `{"v":1}`))
	require.NoError(t, err)
	hs := &hookStore{Store: s}
	g := newIdleAcceptor(hs, eng, realTimer)
	bad := &delivery{envs: []runtime.Envelope{env("taken", `{"v":2}`)}, done: make(chan struct{})}
	hs.during = func() {
		hs.during = func() {}
		g.queue <- bad
	}
	first := &delivery{envs: []runtime.Envelope{env("first", `{}`)}, done: make(chan struct{})}
	g.commit([]*delivery{first})
	assert.NoError(t, first.err)
	assert.ErrorIs(t, bad.err, runtime.ErrConflict)
	assert.Equal(t, 2, countEvents(t, s), `"first" accepted, the conflict not`)
}
