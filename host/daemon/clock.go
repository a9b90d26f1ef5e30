package daemon

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/runtime"
)

// The daemon's clock is Options.Clock, its one source of logical time:
// the engine's timers, waits, retries and leases, the background passes'
// schedules, the now a task.run and a recurrence.next are given. Bounds on
// real work (call and page timeouts, start and shutdown graces, the
// supervisor's restart backoff) stay on real time, so a stopped test
// clock never hangs a call or a restart.

// ManualClock is a clock that moves only when told: serve --test-clock
// runs the daemon on one, and POST /v1/clock/advance moves it. Advance
// and Set (never backwards) move the time first, at once, then call every
// callback due by then, in due order (ties in registration order), and
// return when they have run: whatever a callback wakes sees the new time,
// never a time on the way. runtimetest.FakeClock, which stops at each
// due time on the way, satisfies it too.
type ManualClock interface {
	runtime.Clock
	Advance(d time.Duration)
	Set(t time.Time)
}

// NewManualClock is a manual clock standing at start.
func NewManualClock(start time.Time) ManualClock { return &manualClock{now: start} }

type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*manualTimer
}

type manualTimer struct {
	due time.Time
	seq int
	f   func()
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements runtime.Clock; a d ≤ 0 is due at the next move
// (a zero Advance included).
func (c *manualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &manualTimer{due: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := len(c.timers)
		c.timers = slices.DeleteFunc(c.timers, func(o *manualTimer) bool { return o == t })
		return len(c.timers) < n
	}
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	to := c.now.Add(max(d, 0))
	c.mu.Unlock()
	c.Set(to)
}

func (c *manualClock) Set(to time.Time) {
	c.mu.Lock()
	if to.After(c.now) {
		c.now = to
	}
	c.mu.Unlock()
	for {
		c.mu.Lock()
		i := -1
		for j, t := range c.timers {
			if t.due.After(c.now) {
				continue
			}
			if i < 0 || t.due.Before(c.timers[i].due) || (t.due.Equal(c.timers[i].due) && t.seq < c.timers[i].seq) {
				i = j
			}
		}
		if i < 0 {
			c.mu.Unlock()
			return
		}
		t := c.timers[i]
		c.timers = slices.Delete(c.timers, i, i+1)
		c.mu.Unlock()
		t.f()
	}
}

// Now is the daemon's time.
func (d *Daemon) Now() time.Time { return d.opts.Clock.Now() }

// Clock is the daemon's clock.
func (d *Daemon) Clock() runtime.Clock { return d.opts.Clock }

// ClockState is the daemon's clock as the API shows it.
func (d *Daemon) ClockState() client.ClockState {
	_, manual := d.opts.Clock.(ManualClock)
	return client.ClockState{Now: d.Now().UTC(), Manual: manual}
}

// AdvanceClock moves a manual clock by req (By or To, exactly one) and
// wakes the engine and the passes, whose due work then runs on their own
// goroutines. A daemon on another clock refuses with conflict; a negative
// By, a To before now, or both or neither, with invalid_request.
func (d *Daemon) AdvanceClock(ctx context.Context, req client.ClockAdvance) (client.ClockState, error) {
	mc, ok := d.opts.Clock.(ManualClock)
	if !ok {
		return d.ClockState(), client.Errorf(client.CodeConflict, "the daemon runs on the system clock, which only time moves: start serve with --test-clock")
	}
	switch {
	case req.By != "" && !req.To.IsZero():
		return d.ClockState(), client.Errorf(client.CodeInvalidRequest, "give one of by and to, not both")
	case req.By != "":
		by, err := time.ParseDuration(req.By)
		if err != nil || by < 0 {
			return d.ClockState(), client.Errorf(client.CodeInvalidRequest, "by %q is not a duration of zero or more (such as \"90s\" or \"1h30m\")", clipForMessage(req.By))
		}
		d.clockMu.Lock()
		mc.Advance(by)
		d.clockMu.Unlock()
	case !req.To.IsZero():
		d.clockMu.Lock()
		if now := mc.Now(); req.To.Before(now) {
			d.clockMu.Unlock()
			return d.ClockState(), client.Errorf(client.CodeInvalidRequest, "to %s is before the clock's now %s: the clock never goes back",
				req.To.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
		}
		mc.Set(req.To)
		d.clockMu.Unlock()
	default:
		return d.ClockState(), client.Errorf(client.CodeInvalidRequest, "give by (a duration) or to (a time)")
	}
	d.engine.Kick()
	d.passes.clockMoved()
	d.log.Info("test clock advanced", "now", d.Now().UTC().Format(time.RFC3339Nano))
	return d.ClockState(), nil
}

// clockBackend is what the clock's routes need; a backend without it (a
// test's) answers not_found.
type clockBackend interface {
	ClockState() client.ClockState
	AdvanceClock(ctx context.Context, req client.ClockAdvance) (client.ClockState, error)
}

func (a *api) clockBackend() (clockBackend, error) {
	cb, ok := a.b.(clockBackend)
	if !ok {
		return nil, client.Errorf(client.CodeNotFound, "this daemon serves no clock")
	}
	return cb, nil
}

func (a *api) clock(w http.ResponseWriter, r *http.Request) error {
	cb, err := a.clockBackend()
	if err != nil {
		return err
	}
	return ok(w, cb.ClockState())
}

func (a *api) advanceClock(w http.ResponseWriter, r *http.Request) error {
	cb, err := a.clockBackend()
	if err != nil {
		return err
	}
	body, err := readBody(w, r, maxRequestBody)
	if err != nil {
		return err
	}
	var req client.ClockAdvance
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	st, err := cb.AdvanceClock(r.Context(), req)
	if err != nil {
		return err
	}
	return ok(w, st)
}
