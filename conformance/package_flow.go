package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// OverloadBound is how long the flow check waits for each thing it asks
// of a package with its in-flight bound full: an overloaded answer, or
// the completion of a request whose held host call it answered.
var OverloadBound = 10 * time.Second

// overloadExtra is how many requests the flow check sends over the bound.
const overloadExtra = 4

// CheckPackageOverloaded fills the package's in-flight bound on a spare
// process after its handshake. It picks a request of drivenRequests whose
// handler calls the host, holds every call the package makes to the host
// unanswered, and sends protocol.MaxInflight (64) of that request, then
// overloadExtra more. Each request over the bound must be answered
// overloaded at once, without the package calling the host for it (one
// that does serves more than 64 at once). Then certification answers one
// of the held host calls: with the bound still full, the package must
// read that answer and complete its request, since a reader paused at the
// bound would never see it. A package that serves fewer than 64 at once
// may answer overloaded sooner; one that queues requests it cannot serve
// without answering overloaded fails. A package none of whose requests
// calls the host has nothing to hold in flight: not applicable.
func CheckPackageOverloaded(ctx context.Context, d PackageDriver) error {
	reqs := drivenRequests(d)
	if len(reqs) == 0 {
		return notApplicable("the manifest declares no operation, task or check: no request certification makes calls the host, so none can be held in flight")
	}
	return withSpare(ctx, d, func(p RawPackage) error {
		if err := handshake(ctx, d, p); err != nil {
			return fmt.Errorf("before filling the bound: %w", err)
		}
		var chosen *drivenRequest
		var tried []string
		for i := range reqs {
			if ok, detail := callsHost(ctx, d, p, reqs[i]); ok {
				chosen = &reqs[i]
				break
			} else {
				tried = append(tried, reqs[i].what+": "+detail)
			}
		}
		if chosen == nil {
			return notApplicable("no request certification makes called the host, so none can be held in flight: %s", strings.Join(tried, "; "))
		}
		return fillBound(ctx, d, p, *chosen)
	})
}

// callsHost reports whether r's handler calls the host: it holds that
// call until it is seen, then lets it through and waits for r's answer, so
// the request is over before the bound is filled.
func callsHost(ctx context.Context, d PackageDriver, p RawPackage, r drivenRequest) (bool, string) {
	hold, release := holdCalls()
	restore := p.Intercept(hold)
	defer func() {
		release()
		restore()
	}()
	_, params := r.params()
	from := len(d.Wire())
	cctx, cancel := context.WithTimeout(ctx, 2*OverloadBound)
	defer cancel()
	answered := make(chan error, 1)
	go func() { answered <- p.Call(cctx, r.method, params, nil) }()
	timer := time.NewTimer(OverloadBound)
	defer timer.Stop()
	for {
		changed := d.WireChanged()
		if len(callbacks(decodeWire(d.Wire(), from))) > 0 {
			release()
			if err := <-answered; !serving(err) {
				return false, "its host call, let through, did not complete the request: " + clip(err.Error(), 160)
			}
			return true, ""
		}
		select {
		case err := <-answered:
			return false, "answered " + describeAnswer(err) + " without calling the host"
		case <-changed:
		case <-timer.C:
			return false, fmt.Sprintf("neither answered nor called the host within %v", OverloadBound)
		case <-ctx.Done():
			return false, ctx.Err().Error()
		}
	}
}

// flowGate holds every host call until released one by one; after the
// first release, calls pass.
type flowGate struct {
	mu      sync.Mutex
	held    []chan struct{}
	passing bool
	all     chan struct{}
	once    sync.Once
	// heldOne is closed when the first call is held: a package whose
	// reader answers overloaded at once may not have had its handler call
	// the host yet.
	heldOne     chan struct{}
	heldOneOnce sync.Once
}

// awaitHeld waits until a call is held, for at most bound.
func (g *flowGate) awaitHeld(ctx context.Context, bound time.Duration) {
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-g.heldOne:
	case <-t.C:
	case <-ctx.Done():
	}
}

func (g *flowGate) intercept(ctx context.Context, _ string, _ json.RawMessage) (bool, any, error) {
	g.mu.Lock()
	if g.passing {
		g.mu.Unlock()
		return false, nil, nil
	}
	ch := make(chan struct{})
	g.held = append(g.held, ch)
	g.mu.Unlock()
	g.heldOneOnce.Do(func() { close(g.heldOne) })
	select {
	case <-ch:
		return false, nil, nil
	case <-g.all:
		return false, nil, nil
	case <-ctx.Done():
		return true, nil, ctx.Err()
	}
}

// releaseOne passes the first held call on to the host's service, and
// every call from now on; false when none is held.
func (g *flowGate) releaseOne() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.passing = true
	if len(g.held) == 0 {
		return false
	}
	close(g.held[0])
	return true
}

func (g *flowGate) releaseAll() { g.once.Do(func() { close(g.all) }) }

type flowAnswer struct {
	n   int
	err error
}

// fillBound is CheckPackageOverloaded once it has a request that calls
// the host.
func fillBound(ctx context.Context, d PackageDriver, p RawPackage, r drivenRequest) error {
	gate := &flowGate{all: make(chan struct{}), heldOne: make(chan struct{})}
	restore := p.Intercept(gate.intercept)
	cctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		gate.releaseAll()
		restore()
	}()
	bound := protocol.MaxInflight
	answers := make(chan flowAnswer, bound+overloadExtra)
	send := func(n int) {
		_, params := r.params()
		go func() { answers <- flowAnswer{n: n, err: p.Call(cctx, r.method, params, nil)} }()
	}
	from := len(d.Wire())
	for n := range bound {
		send(n)
	}
	// The extra requests must follow the first ones on the stream: the
	// wire records a line as it is written.
	if err := awaitRequests(ctx, d, from, r.method, bound); err != nil {
		return fmt.Errorf("sending %d requests of %s: %w", bound, r.what, err)
	}
	early := map[int]error{}
	drain := func() {
		for {
			select {
			case a := <-answers:
				early[a.n] = a.err
			default:
				return
			}
		}
	}
	drain()
	for n, err := range early {
		if !errors.Is(err, protocol.ErrOverloaded) {
			return fmt.Errorf("could not hold %d requests in flight: request %d of %s was answered (%v) while certification held the host calls of its handler", bound, n+1, r.what, describeAnswer(err))
		}
	}
	extraFrom := len(d.Wire())
	for n := bound; n < bound+overloadExtra; n++ {
		send(n)
	}
	var errs []error
	deadline := time.NewTimer(OverloadBound)
	defer deadline.Stop()
	pending := overloadExtra
	for pending > 0 {
		select {
		case a := <-answers:
			switch {
			case a.n < bound:
				if !errors.Is(a.err, protocol.ErrOverloaded) {
					return fmt.Errorf("could not hold %d requests in flight: request %d of %s was answered (%v) while certification held the host calls of its handler", bound, a.n+1, r.what, describeAnswer(a.err))
				}
				early[a.n] = a.err
			default:
				pending--
				if !errors.Is(a.err, protocol.ErrOverloaded) {
					errs = append(errs, fmt.Errorf("request %d of %s, sent with %d in flight, was answered %s, not overloaded", a.n+1, r.what, bound, describeAnswer(a.err)))
				}
			}
		case <-deadline.C:
			errs = append(errs, fmt.Errorf("%d of the %d requests of %s sent with %d in flight were not answered within %v: over the bound a package answers overloaded at once instead of queueing or pausing its reader",
				pending, overloadExtra, r.what, bound, OverloadBound))
			pending = 0
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// A handler of an extra request that called the host served it over
	// the bound; its call is on the wire before the answer it led to.
	if cbs := callbacks(decodeWire(d.Wire(), from)); len(cbs) > bound {
		errs = append(errs, atWire(cbs[bound].index, fmt.Errorf("it served more than %d requests at once: %d calls to the host were in flight", bound, len(cbs))))
	}
	// With the bound still full, answer one held host call: its request
	// must complete, so the reader still reads.
	gate.awaitHeld(ctx, OverloadBound)
	if !gate.releaseOne() {
		return errors.Join(append(errs, fmt.Errorf("none of the %d requests of %s held a host call", bound, r.what))...)
	}
	completed := false
	wait := time.NewTimer(OverloadBound)
	defer wait.Stop()
	for !completed {
		select {
		case a := <-answers:
			if _, done := early[a.n]; a.n < bound && !done {
				completed = true
				if errors.Is(a.err, protocol.ErrOverloaded) {
					errs = append(errs, fmt.Errorf("request %d of %s, in flight with its host call answered, ended overloaded", a.n+1, r.what))
				}
			}
		case <-wait.C:
			errs = append(errs, atWire(extraFrom, fmt.Errorf("with %d requests in flight, certification answered one held host call and no request completed within %v: the package stopped reading at its bound, so the answers its handlers wait for are never read", bound, OverloadBound)))
			completed = true
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}

// awaitRequests waits until n requests of method follow line from on the
// wire.
func awaitRequests(ctx context.Context, d PackageDriver, from int, method string, n int) error {
	t := time.NewTimer(OverloadBound)
	defer t.Stop()
	for {
		changed := d.WireChanged()
		count := 0
		for _, m := range decodeWire(d.Wire(), from) {
			if !m.fromExtension && m.request() && m.Method == method {
				count++
			}
		}
		if count >= n {
			return nil
		}
		select {
		case <-changed:
		case <-t.C:
			return fmt.Errorf("only %d of %d were written within %v", count, n, OverloadBound)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// describeAnswer names what a call's error says it was answered with.
func describeAnswer(err error) string {
	var perr *protocol.Error
	switch {
	case err == nil:
		return "with a result"
	case errors.As(err, &perr):
		return fmt.Sprintf("%s (%s)", perr.Code, clip(perr.Message, 120))
	}
	return clip(err.Error(), 160)
}
