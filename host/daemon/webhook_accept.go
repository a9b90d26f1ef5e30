package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-conduit/open-conduit/runtime"
)

// maxGroup bounds the deliveries one commit takes.
const maxGroup = 256

// maxCommitDelay caps how long a group waits for deliveries still on their
// way (see waitForSiblings); the wait is otherwise half the mean commit.
const maxCommitDelay = 2 * time.Millisecond

// groupAcceptor accepts the Events of concurrent webhook deliveries in
// shared commits: a single committer takes every delivery waiting and
// accepts them in one transaction, so 32 senders pay for one commit (its
// fsync) between them rather than one each. Each delivery stays all or
// none: when any envelope of a group is refused the group's transaction
// is rolled back and each of its deliveries is accepted alone, so one
// delivery's refusal never refuses another's.
//
// A group can also wait, briefly, for deliveries still on their way
// (PostgreSQL's commit_delay with commit_siblings): the listener counts
// each request from before its webhook.handle until the committer takes
// its delivery (arriving),
// and while any is counted the committer holds a group that is not full
// for up to half its mean commit (at most maxCommitDelay), or until none
// is counted. A lone delivery is never counted when it is committed, so it
// never waits.
type groupAcceptor struct {
	store  runtime.Store
	engine *runtime.Engine
	queue  chan *delivery
	stop   chan struct{}
	done   sync.WaitGroup
	// inflight counts the requests between arriving and the committer's
	// taking their delivery (or their giving up); arrived is nudged when
	// one gives up, so a waiting committer looks again.
	inflight atomic.Int64
	arrived  chan struct{}
	// timer arms the wait's bound: time.NewTimer's channel, or a test's
	// fake clock.
	timer func(time.Duration) (fired <-chan time.Time, stop func() bool)
	// maxDelay caps the wait, in nanoseconds (maxCommitDelay; 0 turns
	// the wait off, for a benchmark's comparison).
	maxDelay atomic.Int64
	// meanCommit is a moving mean of the commits' durations, in
	// nanoseconds; only the committer uses it.
	meanCommit int64
	// mu orders close after every enqueue under way, so the committer's
	// last drain finds each delivery queued before it.
	mu     sync.RWMutex
	closed bool
	// commits and delivered count group commits and the deliveries they
	// carried (delivered/commits is the sharing a benchmark reports);
	// busy is the time spent committing, in nanoseconds (busy over a
	// benchmark's time says whether the single committer is what bounds
	// it); syncing is the part of busy after a transaction's work, its
	// commit (the log's write and fsync), in nanoseconds.
	commits, delivered, busy, syncing atomic.Int64
	// waits counts groups that waited for siblings, waitTimeouts those of
	// them the bound ended, joined the deliveries that came during a wait
	// and waited the time spent waiting, in nanoseconds.
	waits, waitTimeouts, joined, waited atomic.Int64
	// lateJoined counts the deliveries that joined a transaction under
	// way (lateJoiner).
	lateJoined atomic.Int64
}

// delivery is one request's envelopes and where its outcome goes.
type delivery struct {
	envs   []runtime.Envelope
	events []runtime.Event
	err    error
	done   chan struct{}
	// counted says the delivery holds its request's count in inflight,
	// dropped by the committer when it takes the delivery (took).
	counted bool
}

// lateJoiner is a delivery queued since the group of n was taken, or nil:
// it joins the transaction under way before its commit, so it shares the
// fsync at no wait (the transaction's own work was the wait).
func (g *groupAcceptor) lateJoiner(n int) *delivery {
	if n >= maxGroup {
		return nil
	}
	select {
	case d := <-g.queue:
		g.lateJoined.Add(1)
		return g.took(d)
	default:
		return nil
	}
}

// took is the committer's receipt of d from the queue.
func (g *groupAcceptor) took(d *delivery) *delivery {
	if d.counted {
		d.counted = false
		g.inflight.Add(-1)
	}
	return d
}

func newGroupAcceptor(store runtime.Store, engine *runtime.Engine) *groupAcceptor {
	return startGroupAcceptor(newIdleAcceptor(store, engine, realTimer))
}

// newIdleAcceptor is an acceptor whose committer is not yet running.
func newIdleAcceptor(store runtime.Store, engine *runtime.Engine,
	timer func(time.Duration) (<-chan time.Time, func() bool)) *groupAcceptor {
	g := &groupAcceptor{store: store, engine: engine, queue: make(chan *delivery, maxGroup),
		stop: make(chan struct{}), arrived: make(chan struct{}, 1), timer: timer}
	g.maxDelay.Store(int64(maxCommitDelay))
	return g
}

func startGroupAcceptor(g *groupAcceptor) *groupAcceptor {
	g.done.Add(1)
	go g.run()
	return g
}

func realTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// arrival is one request counted in flight until the committer takes its
// delivery or it gives up (gone).
type arrival struct {
	g       *groupAcceptor
	counted bool
}

// arriving counts a request that will soon, most likely, bring a delivery:
// call it before webhook.handle, and gone (deferred) on every path.
func (g *groupAcceptor) arriving() arrival {
	g.inflight.Add(1)
	return arrival{g: g, counted: true}
}

// gone stops counting the request; once is enough, more do nothing.
func (a *arrival) gone() {
	if !a.counted {
		return
	}
	a.counted = false
	a.g.inflight.Add(-1)
	select {
	case a.g.arrived <- struct{}{}:
	default:
	}
}

// accept is groupAcceptor.accept for a counted request: it stops being
// counted when the committer takes its delivery.
func (a *arrival) accept(ctx context.Context, envs []runtime.Envelope) ([]runtime.Event, error) {
	return a.g.enqueue(ctx, envs, a)
}

// accept durably accepts envs, all or none, and returns their Events once
// committed. A delivery already handed to the committer is waited for
// whatever ctx does, so an answer never says "nothing accepted" about
// Events that were; ctx bounds only the wait for a place in the queue.
func (g *groupAcceptor) accept(ctx context.Context, envs []runtime.Envelope) ([]runtime.Event, error) {
	return g.enqueue(ctx, envs, nil)
}

func (g *groupAcceptor) enqueue(ctx context.Context, envs []runtime.Envelope, a *arrival) ([]runtime.Event, error) {
	if a != nil {
		defer a.gone()
	}
	if len(envs) == 0 {
		return nil, nil
	}
	d := &delivery{envs: envs, done: make(chan struct{})}
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return nil, errAcceptorClosed
	}
	if a != nil && a.counted {
		// The count goes with the delivery and the committer drops it as
		// it takes it: while queued it is still awaited, and once taken a
		// committer never waits for it (a lone delivery never waits).
		d.counted, a.counted = true, false
	}
	select {
	case g.queue <- d:
		g.mu.RUnlock()
	case <-ctx.Done():
		g.mu.RUnlock()
		if d.counted {
			a.counted = true
		}
		return nil, ctx.Err()
	}
	<-d.done
	return d.events, d.err
}

// close stops the committer once it has finished what it holds; the
// listener has stopped taking requests first.
func (g *groupAcceptor) close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	g.mu.Unlock()
	close(g.stop)
	g.done.Wait()
}

var errAcceptorClosed = errors.New("daemon: the webhook acceptor is closed")

func (g *groupAcceptor) run() {
	defer g.done.Done()
	for {
		var first *delivery
		select {
		case first = <-g.queue:
		case <-g.stop:
			// No delivery is queued once stop is closed (close waits for
			// the enqueues under way): finish those queued.
			for {
				select {
				case d := <-g.queue:
					g.commit([]*delivery{g.took(d)})
				default:
					return
				}
			}
		}
		group := []*delivery{g.took(first)}
		for len(group) < maxGroup {
			select {
			case d := <-g.queue:
				group = append(group, g.took(d))
				continue
			default:
			}
			break
		}
		g.commit(g.waitForSiblings(group))
	}
}

// waitForSiblings holds a group that is not full while other requests are
// in flight, for up to the commit delay or until none is, taking each
// delivery that arrives meanwhile: a commit's fsync is shared by more
// deliveries for a small bounded wait. With none in flight (a lone
// sender, or all the others already queued) it returns at once.
func (g *groupAcceptor) waitForSiblings(group []*delivery) []*delivery {
	if len(group) >= maxGroup || g.inflight.Load() == 0 {
		return group
	}
	bound := time.Duration(min(g.meanCommit/2, g.maxDelay.Load()))
	if bound <= 0 {
		return group
	}
	g.waits.Add(1)
	start := time.Now()
	defer func() { g.waited.Add(int64(time.Since(start))) }()
	fired, stop := g.timer(bound)
	defer stop()
	for len(group) < maxGroup && g.inflight.Load() > 0 {
		select {
		case d := <-g.queue:
			group = append(group, g.took(d))
			g.joined.Add(1)
		case <-g.arrived:
		case <-fired:
			g.waitTimeouts.Add(1)
			return group
		case <-g.stop:
			return group
		}
	}
	return group
}

// commit accepts a group in one transaction, or, when any of it is
// refused, each delivery in its own. Deliveries queued while the
// transaction does its work join it before it commits (lateJoiner).
func (g *groupAcceptor) commit(group []*delivery) {
	// The store's own bounds apply; no request's context ends a commit
	// under way (its sender is owed the truth of what was accepted).
	ctx := context.Background()
	start := time.Now()
	defer func() {
		took := int64(time.Since(start))
		g.busy.Add(took)
		if g.meanCommit == 0 {
			g.meanCommit = took
		} else {
			g.meanCommit += (took - g.meanCommit) / 8
		}
	}()
	var worked time.Time // when the transaction's work ended
	err := g.store.Transact(ctx, func(tx runtime.Tx) error {
		for i := 0; ; i++ {
			if i == len(group) {
				d := g.lateJoiner(len(group))
				if d == nil {
					worked = time.Now()
					return nil
				}
				group = append(group, d)
			}
			d := group[i]
			d.events = d.events[:0]
			for i, env := range d.envs {
				ev, _, err := tx.AcceptEvent(env)
				if err != nil {
					return fmt.Errorf("envelope %d (%s/%s): %w", i, env.Source, env.DeliveryID, err)
				}
				d.events = append(d.events, ev)
			}
		}
	})
	if err == nil {
		g.syncing.Add(int64(time.Since(worked)))
	}
	g.commits.Add(1)
	g.delivered.Add(int64(len(group)))
	if err == nil || len(group) == 1 {
		for _, d := range group {
			if err != nil {
				d.events, d.err = nil, err
			}
			close(d.done)
		}
		if err == nil {
			g.engine.Kick()
		}
		return
	}
	for _, d := range group {
		d.events, d.err = g.engine.Accept(ctx, d.envs...)
		close(d.done)
	}
}
