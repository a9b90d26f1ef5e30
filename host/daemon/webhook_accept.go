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

// groupAcceptor accepts the Events of concurrent webhook deliveries in
// shared commits: a single committer takes every delivery waiting and
// accepts them in one transaction, so 32 senders pay for one commit (its
// fsync) between them rather than one each. Each delivery stays all or
// none: when any envelope of a group is refused the group's transaction
// is rolled back and each of its deliveries is accepted alone, so one
// delivery's refusal never refuses another's.
type groupAcceptor struct {
	store  runtime.Store
	engine *runtime.Engine
	queue  chan *delivery
	stop   chan struct{}
	done   sync.WaitGroup
	// mu orders close after every enqueue under way, so the committer's
	// last drain finds each delivery queued before it.
	mu     sync.RWMutex
	closed bool
	// commits and delivered count group commits and the deliveries they
	// carried (delivered/commits is the sharing a benchmark reports);
	// busy is the time spent committing, in nanoseconds (busy over a
	// benchmark's time says whether the single committer is what bounds
	// it).
	commits, delivered, busy atomic.Int64
}

// delivery is one request's envelopes and where its outcome goes.
type delivery struct {
	envs   []runtime.Envelope
	events []runtime.Event
	err    error
	done   chan struct{}
}

func newGroupAcceptor(store runtime.Store, engine *runtime.Engine) *groupAcceptor {
	g := &groupAcceptor{store: store, engine: engine, queue: make(chan *delivery, maxGroup), stop: make(chan struct{})}
	g.done.Add(1)
	go g.run()
	return g
}

// accept durably accepts envs, all or none, and returns their Events once
// committed. A delivery already handed to the committer is waited for
// whatever ctx does, so an answer never says "nothing accepted" about
// Events that were; ctx bounds only the wait for a place in the queue.
func (g *groupAcceptor) accept(ctx context.Context, envs []runtime.Envelope) ([]runtime.Event, error) {
	if len(envs) == 0 {
		return nil, nil
	}
	d := &delivery{envs: envs, done: make(chan struct{})}
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return nil, errAcceptorClosed
	}
	select {
	case g.queue <- d:
		g.mu.RUnlock()
	case <-ctx.Done():
		g.mu.RUnlock()
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
					g.commit([]*delivery{d})
				default:
					return
				}
			}
		}
		group := []*delivery{first}
		for len(group) < maxGroup {
			select {
			case d := <-g.queue:
				group = append(group, d)
				continue
			default:
			}
			break
		}
		g.commit(group)
	}
}

// commit accepts a group in one transaction, or, when any of it is
// refused, each delivery in its own.
func (g *groupAcceptor) commit(group []*delivery) {
	// The store's own bounds apply; no request's context ends a commit
	// under way (its sender is owed the truth of what was accepted).
	ctx := context.Background()
	start := time.Now()
	defer func() { g.busy.Add(int64(time.Since(start))) }()
	err := g.store.Transact(ctx, func(tx runtime.Tx) error {
		for _, d := range group {
			d.events = d.events[:0]
			for i, env := range d.envs {
				ev, _, err := tx.AcceptEvent(env)
				if err != nil {
					return fmt.Errorf("envelope %d (%s/%s): %w", i, env.Source, env.DeliveryID, err)
				}
				d.events = append(d.events, ev)
			}
		}
		return nil
	})
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
