package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/runtime"
)

// The background passes run on the daemon's clock: each admitted
// package's declared tasks (task.run) at their intervals, and each
// ingress source the packages registered for reconcile (runtime's
// Engine.Reconcile, under its page timeout and item and byte limits)
// every reconcile_interval its registration declares (ReconcileInterval
// when it declares none). A pass runs first when the daemon starts (or the
// source is registered), then one interval after each run's start. A pass
// never runs twice at once: one that outlives its interval is counted and
// logged as an overrun, and the next run starts when it ends (missed
// intervals collapse into that one run, never a burst). A failed task is
// retried at its next interval; a failed scan (a partial one: nothing
// inferred, no checkpoint moved) after ReconcileRetry.

// ReconcileInterval is how often a reconciling ingress source is scanned
// when its registration declares no reconcile_interval.
var ReconcileInterval = 5 * time.Minute

// ReconcileRetry is how soon a scan that failed part-way is run again
// (at most its interval).
var ReconcileRetry = 30 * time.Second

// maxPassDetail bounds what a pass's detail or error shows in status and
// the log: it comes from the package.
const maxPassDetail = 512

// passSpec is one background pass: what it runs, and when.
type passSpec struct {
	kind, name, pkg string
	interval        time.Duration
	// retry, when set, brings a failed run's next one forward to retry
	// after its end; zero retries at the next interval.
	retry time.Duration
	// run is one run at now, the daemon's time; detail is one line of
	// what it did.
	run func(ctx context.Context, now time.Time) (detail string, err error)
}

func (s passSpec) key() string { return s.kind + "\x00" + s.pkg + "\x00" + s.name }

// passRunner runs passes, one goroutine each, on a clock.
type passRunner struct {
	clock runtime.Clock
	log   *slog.Logger

	mu     sync.Mutex
	ctx    context.Context // set by start; nil before
	passes map[string]*pass
	// moved is closed (and replaced) each time a manual clock is moved,
	// so a pass whose timer a move raced re-reads the clock.
	moved chan struct{}
	wg    sync.WaitGroup
	// ran, when set (tests), hears each run's status once it is recorded.
	ran func(client.PassStatus)
}

// pass is one pass and its status.
type pass struct {
	spec    passSpec
	removed chan struct{}     // closed when the pass is taken out
	status  client.PassStatus // guarded by passRunner.mu
}

func newPassRunner(clock runtime.Clock, log *slog.Logger) *passRunner {
	return &passRunner{clock: clock, log: log, passes: map[string]*pass{}, moved: make(chan struct{})}
}

// set makes specs the passes of kind: a pass already there (same name,
// package and interval) keeps its schedule and status, one no longer
// there is taken out (a run under way finishes), a new one is added and,
// once the runner has started, runs at once.
func (r *passRunner) set(kind string, specs []passSpec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	want := map[string]passSpec{}
	for _, s := range specs {
		s.kind = kind
		want[s.key()] = s
	}
	for k, p := range r.passes {
		if p.spec.kind != kind {
			continue
		}
		if s, ok := want[k]; ok && s.interval == p.spec.interval {
			delete(want, k)
			continue
		}
		close(p.removed)
		delete(r.passes, k)
	}
	for k, s := range want {
		p := &pass{spec: s, removed: make(chan struct{}), status: client.PassStatus{Kind: s.kind, Name: s.name,
			Package: s.pkg, Interval: s.interval.String()}}
		r.passes[k] = p
		if r.ctx != nil {
			r.launch(p)
		}
	}
}

// start runs every pass until ctx ends; wait waits for them to return.
func (r *passRunner) start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx != nil {
		return
	}
	r.ctx = ctx
	for _, p := range r.passes {
		r.launch(p)
	}
}

func (r *passRunner) wait() { r.wg.Wait() }

// launch starts p's goroutine; r.mu is held.
func (r *passRunner) launch(p *pass) {
	ctx := r.ctx
	r.wg.Go(func() { r.loop(ctx, p) })
}

// clockMoved wakes every pass to read the clock again.
func (r *passRunner) clockMoved() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.moved)
	r.moved = make(chan struct{})
}

// statuses are the passes by kind, package and name.
func (r *passRunner) statuses() []client.PassStatus {
	if r == nil {
		return nil // a Daemon not built by Open
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]client.PassStatus, 0, len(r.passes))
	for _, p := range r.passes {
		out = append(out, p.status)
	}
	slices.SortFunc(out, func(a, b client.PassStatus) int {
		return strings.Compare(a.Kind+"\x00"+a.Package+"\x00"+a.Name, b.Kind+"\x00"+b.Package+"\x00"+b.Name)
	})
	return out
}

func (r *passRunner) loop(ctx context.Context, p *pass) {
	s := p.spec
	due := r.clock.Now()
	r.mu.Lock()
	p.status.Next = due.UTC()
	r.mu.Unlock()
	for {
		if !r.sleepUntil(ctx, p.removed, due) {
			return
		}
		start := r.clock.Now()
		r.mu.Lock()
		p.status.Running, p.status.LastStarted = true, start.UTC()
		r.mu.Unlock()
		detail, err := s.run(ctx, start)
		end := r.clock.Now()
		if err != nil && ctx.Err() != nil {
			// Shutdown cut the run short: not the pass's failure.
			r.mu.Lock()
			p.status.Running = false
			r.mu.Unlock()
			return
		}
		due = start.Add(s.interval)
		overran := end.After(due)
		if err != nil && s.retry > 0 {
			due = minTime(due, end.Add(s.retry))
		}
		r.mu.Lock()
		st := &p.status
		st.Running, st.LastEnded, st.Next = false, end.UTC(), due.UTC()
		st.Runs++
		if err != nil {
			st.Failures++
			st.LastError = clip(oneLine(err.Error()), maxPassDetail)
		} else {
			st.LastError, st.LastDetail = "", clip(oneLine(detail), maxPassDetail)
		}
		if overran {
			st.Overruns++
		}
		runs, recorded, ran := st.Runs, *st, r.ran
		r.mu.Unlock()
		if ran != nil {
			ran(recorded)
		}

		attrs := []any{"kind", s.kind, "package", s.pkg, "name", s.name, "runs", runs}
		switch {
		case err != nil:
			r.log.Warn("background pass failed", append(attrs, "err", clip(oneLine(err.Error()), maxPassDetail), "next", due.UTC())...)
		case s.kind == client.PassTask || detail != "":
			r.log.Info("background pass ran", append(attrs, "detail", clip(oneLine(detail), maxPassDetail))...)
		}
		if overran {
			r.log.Warn("background pass outlived its interval: the next run waited for it",
				append(attrs, "took", end.Sub(start), "interval", s.interval)...)
		}
	}
}

// sleepUntil waits until the clock reaches due; false when ctx ends or
// the pass is removed first.
func (r *passRunner) sleepUntil(ctx context.Context, removed <-chan struct{}, due time.Time) bool {
	for {
		// The move channel is read before the clock, so a move after the
		// read (which might make the timer below late) wakes the wait.
		r.mu.Lock()
		moved := r.moved
		r.mu.Unlock()
		now := r.clock.Now()
		if !now.Before(due) {
			return true
		}
		fired := make(chan struct{}, 1)
		stop := r.clock.AfterFunc(due.Sub(now), func() { fired <- struct{}{} })
		select {
		case <-fired:
		case <-moved:
		case <-ctx.Done():
			stop()
			return false
		case <-removed:
			stop()
			return false
		}
		stop()
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// ---- the daemon's passes ----

// taskPasses are the declared tasks of every admitted package, each run
// through the package's current process.
func (d *Daemon) taskPasses() []passSpec {
	var specs []passSpec
	for _, pr := range d.packages() {
		for _, t := range pr.pkg.Manifest.Provides.Tasks {
			interval, err := time.ParseDuration(t.Interval)
			if err != nil || interval < time.Second {
				continue // the manifest's validation refuses it
			}
			specs = append(specs, passSpec{name: t.Name, pkg: pr.pkg.Name, interval: interval,
				run: func(ctx context.Context, now time.Time) (string, error) {
					proc, remote, _ := pr.parts()
					if st, _, _ := proc.Status(); st != host.Running {
						return "", fmt.Errorf("package %s is %s", pr.pkg.Name, packageState(st))
					}
					return remote.RunTask(ctx, t.Name, now)
				}})
		}
	}
	return specs
}

// sourcePasses are the ingress sources the packages registered for
// reconcile in their last configure, each scanned through the engine.
func (d *Daemon) sourcePasses() []passSpec {
	var specs []passSpec
	for _, pr := range d.packages() {
		for _, src := range pr.svc.Sources() {
			if !src.Reconcile {
				continue
			}
			interval := ReconcileInterval
			if d, err := time.ParseDuration(src.ReconcileInterval); err == nil && d >= time.Second {
				interval = d // configure's check refused any other
			}
			specs = append(specs, passSpec{name: src.Name, pkg: pr.pkg.Name, interval: interval,
				retry: min(ReconcileRetry, interval),
				run: func(ctx context.Context, _ time.Time) (string, error) {
					rep, err := d.engine.Reconcile(ctx, src.Name)
					if errors.Is(err, runtime.ErrNotFound) {
						return "", fmt.Errorf("source %s is not registered with the engine", src.Name)
					}
					if err != nil {
						return "", err
					}
					if len(rep.Accepted) == 0 && len(rep.Absent) == 0 {
						return "", nil // an unchanged scan is not news
					}
					return fmt.Sprintf("%d pages, %d observed, %d accepted, %d unchanged, %d absent",
						rep.Pages, rep.Observed, len(rep.Accepted), rep.Unchanged, len(rep.Absent)), nil
				}})
		}
	}
	return specs
}

// syncSourcePasses makes the reconcile passes the sources registered now;
// it follows every replacement of the engine's tables.
func (d *Daemon) syncSourcePasses() { d.passes.set(client.PassReconcile, d.sourcePasses()) }

// waitPasses waits, within PassBound, for the passes to return once Run's
// context has ended (a run under way has its context cancelled).
func (d *Daemon) waitPasses() {
	done := make(chan struct{})
	go func() { d.passes.wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(PassBound):
		d.log.Warn("a background pass was still running at shutdown", "waited", PassBound)
	}
}
