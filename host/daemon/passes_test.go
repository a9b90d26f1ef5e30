package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
)

var passEpoch = time.Date(2026, 1, 5, 8, 30, 0, 0, time.UTC)

// passHarness runs passes on a fake clock; each run reports its now on
// runs and then does what the test's behave says.
type passHarness struct {
	clock  ManualClock
	runner *passRunner
	runs   chan time.Time
	// statuses hears each run's status once recorded.
	statuses chan client.PassStatus
	log      *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newPassHarness(t *testing.T) *passHarness {
	h := &passHarness{clock: NewManualClock(passEpoch), runs: make(chan time.Time, 16), log: &syncBuffer{}}
	h.statuses = make(chan client.PassStatus, 16)
	h.runner = newPassRunner(h.clock, slog.New(slog.NewTextHandler(h.log, nil)))
	h.runner.ran = func(st client.PassStatus) {
		select {
		case h.statuses <- st:
		default: // a test that reads none must not hold the pass up
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); h.runner.wait() })
	h.runner.start(ctx)
	return h
}

// advance moves the clock as the daemon's AdvanceClock does.
func (h *passHarness) advance(d time.Duration) {
	h.clock.Advance(d)
	h.runner.clockMoved()
}

func (h *passHarness) nextRun(t *testing.T) time.Time {
	t.Helper()
	select {
	case now := <-h.runs:
		return now
	case <-time.After(time.Minute):
		t.Fatal("no run")
		return time.Time{}
	}
}

// recorded is the next run's status as recorded.
func (h *passHarness) recorded(t *testing.T) client.PassStatus {
	t.Helper()
	select {
	case st := <-h.statuses:
		return st
	case <-time.After(time.Minute):
		t.Fatal("no run recorded")
		return client.PassStatus{}
	}
}

func (h *passHarness) status(t *testing.T) client.PassStatus {
	t.Helper()
	st := h.runner.statuses()
	require.Len(t, st, 1)
	return st[0]
}

// A pass runs at once, then at each interval after its start, on the
// clock: a run's now tells when it ran, so one that ran early would say so.
func TestPassRunsAtEachIntervalOnTheClock(t *testing.T) {
	h := newPassHarness(t)
	h.runner.set(client.PassTask, []passSpec{{name: "arm", pkg: "notes", interval: time.Hour,
		run: func(_ context.Context, now time.Time) (string, error) { h.runs <- now; return "armed", nil }}})
	assert.Equal(t, passEpoch, h.nextRun(t), "the first run is at once")
	h.recorded(t)
	h.advance(time.Hour - time.Second)
	h.advance(time.Second)
	assert.Equal(t, passEpoch.Add(time.Hour), h.nextRun(t), "the next run is one interval after the first's start, not before")
	h.recorded(t)
	h.advance(3 * time.Hour)
	assert.Equal(t, passEpoch.Add(4*time.Hour), h.nextRun(t), "missed intervals collapse into one run")
	h.recorded(t)
	h.advance(time.Hour)
	assert.Equal(t, passEpoch.Add(5*time.Hour), h.nextRun(t))
	assert.Zero(t, h.recorded(t).Overruns)
	select {
	case now := <-h.runs:
		t.Fatalf("an extra run at %s", now)
	default:
	}
}

// A run that outlives its interval is counted and logged, and the next
// run waits for it: never two at once.
func TestPassOverrunIsReportedAndTheNextRunWaits(t *testing.T) {
	h := newPassHarness(t)
	release := make(chan struct{})
	var active, most atomic.Int32
	var n atomic.Int32
	h.runner.set(client.PassTask, []passSpec{{name: "slow", pkg: "p", interval: time.Minute,
		run: func(_ context.Context, now time.Time) (string, error) {
			if a := active.Add(1); a > most.Load() {
				most.Store(a)
			}
			defer active.Add(-1)
			h.runs <- now
			if n.Add(1) == 1 {
				<-release
			}
			return "", nil
		}}})
	h.nextRun(t)
	h.advance(3 * time.Minute) // three intervals pass while the first run goes on
	st := h.status(t)
	assert.True(t, st.Running)
	assert.Zero(t, st.Runs)
	close(release)
	assert.Equal(t, passEpoch.Add(3*time.Minute), h.nextRun(t), "the next run starts when the overrunning one ends, once")
	assert.Equal(t, int32(1), most.Load(), "never two runs at once")
	st = h.status(t)
	assert.Equal(t, int64(1), st.Overruns)
	assert.Contains(t, h.log.String(), "outlived its interval")
	assert.Contains(t, h.log.String(), "name=slow")
}

// A failed scan is retried after its retry, a failed task at its next
// interval; status shows the failure until a run succeeds.
func TestPassFailureRetry(t *testing.T) {
	for _, tc := range []struct {
		name         string
		retry, after time.Duration
	}{
		{"scan retried soon", 30 * time.Second, 30 * time.Second},
		{"task retried next interval", 0, 5 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newPassHarness(t)
			var n atomic.Int32
			h.runner.set(client.PassReconcile, []passSpec{{name: "src", pkg: "p", interval: 5 * time.Minute, retry: tc.retry,
				run: func(_ context.Context, now time.Time) (string, error) {
					h.runs <- now
					if n.Add(1) == 1 {
						return "", errors.New("notes crashed mid-scan\nforged line")
					}
					return "1 accepted", nil
				}}})
			h.nextRun(t)
			h.recorded(t) // the failure's end is on the clock: move it only after
			h.advance(tc.after - time.Second)
			h.advance(time.Second)
			assert.Equal(t, passEpoch.Add(tc.after), h.nextRun(t))
			st := h.recorded(t)
			for st.Runs < 2 {
				st = h.recorded(t)
			}
			assert.Equal(t, int64(1), st.Failures)
			assert.Empty(t, st.LastError, "the retry succeeded")
			assert.Equal(t, "1 accepted", st.LastDetail)
			assert.Contains(t, h.log.String(), "notes crashed mid-scan forged line", "a package's error is one log line")
		})
	}
}

// set keeps a pass that stays (its status too), stops one that goes and
// runs a new one at once.
func TestPassSetReplacesByKind(t *testing.T) {
	h := newPassHarness(t)
	spec := func(name string) passSpec {
		return passSpec{name: name, pkg: "p", interval: time.Minute,
			run: func(_ context.Context, now time.Time) (string, error) { h.runs <- now; return name, nil }}
	}
	h.runner.set(client.PassReconcile, []passSpec{spec("a")})
	h.nextRun(t)
	h.recorded(t)
	h.runner.set(client.PassTask, []passSpec{spec("t")})
	h.nextRun(t)
	h.recorded(t)
	h.runner.set(client.PassReconcile, []passSpec{spec("b")})
	h.nextRun(t)
	h.recorded(t)
	var names []string
	for _, st := range h.runner.statuses() {
		names = append(names, st.Kind+":"+st.Name)
	}
	assert.Equal(t, []string{"reconcile:b", "task:t"}, names, "a went, t stayed")
	h.advance(time.Minute)
	got := map[time.Time]int{}
	got[h.nextRun(t)]++
	got[h.nextRun(t)]++
	assert.Equal(t, map[time.Time]int{passEpoch.Add(time.Minute): 2}, got, "b and t run, a does not")
}

// Each reconciling source is scanned every reconcile_interval its
// registration declares, else every ReconcileInterval; a push-only source
// is not scanned; every pass of the daemon runs on its own schedule.
func TestDaemonPassesFollowTheirDeclarations(t *testing.T) {
	m, err := protocol.LoadManifest(filepath.Join("..", "..", "extensions", "notes"))
	require.NoError(t, err)
	svc := host.NewService(host.ServiceConfig{Manifest: m})
	fam := []string{"notes.note"}
	require.NoError(t, svc.Configure(protocol.ConfigureParams{Entries: []protocol.ConfigEntry{{ScopeID: "home", ID: "inbox", Type: "notes"}}},
		protocol.ConfigureResult{Sources: []protocol.SourceDecl{
			{Name: "notes/fast", ScopeID: "home", Families: fam, Reconcile: true, ReconcileInterval: "90s"},
			{Name: "notes/default", ScopeID: "home", Families: fam, Reconcile: true},
			{Name: "notes/push", ScopeID: "home", Families: fam},
		}}))
	d := &Daemon{pkgs: []*pkgRun{{pkg: host.Package{Name: "notes", Manifest: m}, svc: svc}}}
	got := map[string]time.Duration{}
	for _, s := range append(d.sourcePasses(), d.taskPasses()...) {
		got[s.name] = s.interval
	}
	assert.Equal(t, map[string]time.Duration{"notes/fast": 90 * time.Second, "notes/default": ReconcileInterval,
		"notes-digest-arm": time.Hour}, got)
}
