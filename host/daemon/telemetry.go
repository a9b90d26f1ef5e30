package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
)

// Bounds of the telemetry pipeline. Variables, so tests can shrink them.
var (
	// TelemetryBuffer is how many events each sink's buffer holds; an
	// event that finds it full is dropped for that sink and counted.
	TelemetryBuffer = 1024
	// TelemetrySinkTimeout bounds one telemetry.sink batch.
	TelemetrySinkTimeout = 5 * time.Second
	// TelemetryLogLimit bounds the telemetry log; events past it are
	// not written, and counted.
	TelemetryLogLimit int64 = 64 << 20
)

// maxSinkBatch is the most events one telemetry.sink call carries.
const maxSinkBatch = 64

// TelemetryLogFile is the telemetry log's name in the log directory.
const TelemetryLogFile = "telemetry.jsonl"

// CodeTelemetryDropped is the telemetry check's code when events were
// dropped (a full sink buffer, a failed batch, the log at its limit).
const CodeTelemetryDropped = "telemetry_dropped"

// telemetry is the daemon's telemetry pipeline: every event a package
// captures (telemetry.capture) is stamped with the daemon's clock, written
// to <logs>/telemetry.jsonl and handed to each sink (a package holding
// telemetry.sink) through that sink's bounded buffer. Recording never
// waits for a sink: a full buffer drops the event for that sink and counts
// it, so a slow sink never holds up a package or scheduling. Closing
// flushes what the buffers hold, within TelemetrySinkTimeout in all. The
// set of sinks follows the packages a reload admits (setSinks).
type telemetry struct {
	now     func() time.Time
	logPath string
	log     *slog.Logger

	captured atomic.Int64

	mu         sync.Mutex // the log file
	file       *os.File
	written    int64
	logDropped int64

	// deliver is how a sink's batch reaches the package of that name,
	// whichever process runs it then.
	deliver func(ctx context.Context, name string, batch []protocol.TelemetryEvent) error
	sinks   []*telemetrySink
	// retired are sinks a reload removed, kept for their accounting.
	retired []*telemetrySink
	started bool
	// gate orders recording against close and against a change of the
	// sinks: once closed is set no event enters a buffer, so the flush
	// sees every one that did.
	gate   sync.RWMutex
	closed bool
	quit   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

// telemetrySink is one sink: its buffer and its accounting.
type telemetrySink struct {
	name    string
	buf     chan protocol.TelemetryEvent
	deliver func(ctx context.Context, batch []protocol.TelemetryEvent) error
	// removed is closed when the sink's package is no longer admitted.
	removed chan struct{}

	delivered, dropped, failed atomic.Int64
}

// newTelemetry is a pipeline writing to logPath; add its sinks, then
// start it.
func newTelemetry(logPath string, now func() time.Time, log *slog.Logger) *telemetry {
	return &telemetry{now: now, logPath: logPath, log: log, quit: make(chan struct{})}
}

// addSink adds a sink buffering up to size events, before start.
func (t *telemetry) addSink(name string, size int, deliver func(context.Context, []protocol.TelemetryEvent) error) *telemetrySink {
	s := t.newSink(name, size, deliver)
	t.sinks = append(t.sinks, s)
	return s
}

func (t *telemetry) newSink(name string, size int, deliver func(context.Context, []protocol.TelemetryEvent) error) *telemetrySink {
	return &telemetrySink{name: name, buf: make(chan protocol.TelemetryEvent, size), deliver: deliver, removed: make(chan struct{})}
}

// start runs one delivery loop per sink until close.
func (t *telemetry) start() {
	t.gate.Lock()
	defer t.gate.Unlock()
	t.started = true
	for _, s := range t.sinks {
		t.wg.Go(func() { t.deliverLoop(s) })
	}
}

// setSinks makes the sinks the packages named (each delivered to through
// t.deliver), after a reload changed the packages: a sink already there
// keeps its buffer and its counts (a restarted package gets what was
// buffered for it), a new one starts with an empty buffer, and one no
// longer named stops, counting what its buffer held as failed.
func (t *telemetry) setSinks(names []string) {
	t.gate.Lock()
	defer t.gate.Unlock()
	if t.closed {
		return
	}
	kept := t.sinks[:0:0]
	for _, s := range t.sinks {
		if slices.Contains(names, s.name) {
			kept = append(kept, s)
			continue
		}
		close(s.removed)
		t.retired = append(t.retired, s)
	}
	for _, name := range names {
		if !slices.ContainsFunc(kept, func(s *telemetrySink) bool { return s.name == name }) {
			s := t.newSink(name, TelemetryBuffer, func(ctx context.Context, batch []protocol.TelemetryEvent) error {
				return t.deliver(ctx, name, batch)
			})
			kept = append(kept, s)
			if t.started {
				t.wg.Go(func() { t.deliverLoop(s) })
			}
		}
	}
	t.sinks = kept
}

// RecordTelemetry records one captured event: the log, then each sink's
// buffer, never waiting for a sink.
func (t *telemetry) RecordTelemetry(_ context.Context, ev protocol.TelemetryEvent) error {
	t.gate.RLock()
	defer t.gate.RUnlock()
	if t.closed {
		return protocol.NewError(protocol.CodeShuttingDown, "the daemon is shutting down")
	}
	ev.Time = t.now().UTC()
	t.captured.Add(1)
	if err := t.writeLog(ev); err != nil {
		t.log.Warn("telemetry log", "err", err)
	}
	for _, s := range t.sinks {
		select {
		case s.buf <- ev:
		default:
			s.dropped.Add(1)
		}
	}
	return nil
}

func (t *telemetry) writeLog(ev protocol.TelemetryEvent) error {
	line, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.file == nil {
		f, err := os.OpenFile(t.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			t.logDropped++
			return err
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			t.logDropped++
			return err
		}
		t.file, t.written = f, info.Size()
	}
	if t.written+int64(len(line)) > TelemetryLogLimit {
		t.logDropped++
		return nil
	}
	n, err := t.file.Write(line)
	t.written += int64(n)
	if err != nil {
		t.logDropped++
	}
	return err
}

// deliverLoop hands s's buffered events to its package in batches, each a
// request bounded by TelemetrySinkTimeout. A failed batch is counted (the
// events are not retried: telemetry is best effort, with accounting). At
// close it flushes the buffer, all of it within one TelemetrySinkTimeout;
// what is left then is counted as failed. A sink removed by a reload stops
// and counts what its buffer held as failed: no package is there to get it.
func (t *telemetry) deliverLoop(s *telemetrySink) {
	for {
		// Removal first: what the buffer holds is no package's any more.
		select {
		case <-s.removed:
			for batch := s.take(nil); len(batch) > 0; batch = s.take(nil) {
				s.failed.Add(int64(len(batch)))
			}
			return
		default:
		}
		select {
		case <-s.removed:
			for batch := s.take(nil); len(batch) > 0; batch = s.take(nil) {
				s.failed.Add(int64(len(batch)))
			}
			return
		case <-t.quit:
			ctx, cancel := context.WithTimeout(context.Background(), TelemetrySinkTimeout)
			defer cancel()
			for batch := s.take(nil); len(batch) > 0; batch = s.take(nil) {
				if ctx.Err() != nil {
					s.failed.Add(int64(len(batch)))
					continue
				}
				t.send(ctx, s, batch)
			}
			return
		case ev := <-s.buf:
			ctx, cancel := context.WithTimeout(context.Background(), TelemetrySinkTimeout)
			t.send(ctx, s, s.take([]protocol.TelemetryEvent{ev}))
			cancel()
		}
	}
}

// take adds to batch what s's buffer holds now, up to maxSinkBatch.
func (s *telemetrySink) take(batch []protocol.TelemetryEvent) []protocol.TelemetryEvent {
	for len(batch) < maxSinkBatch {
		select {
		case ev := <-s.buf:
			batch = append(batch, ev)
		default:
			return batch
		}
	}
	return batch
}

func (t *telemetry) send(ctx context.Context, s *telemetrySink, batch []protocol.TelemetryEvent) {
	if err := s.deliver(ctx, batch); err != nil {
		s.failed.Add(int64(len(batch)))
		t.log.Warn("telemetry sink batch dropped", "package", s.name, "events", len(batch), "err", err)
		return
	}
	s.delivered.Add(int64(len(batch)))
}

// close refuses further events, flushes every sink's buffer (bounded) and
// closes the log. close may be called more than once, and on nil.
func (t *telemetry) close() {
	if t == nil {
		return
	}
	t.once.Do(func() {
		t.gate.Lock()
		t.closed = true
		t.gate.Unlock()
		close(t.quit)
		t.wg.Wait()
		t.mu.Lock()
		if t.file != nil {
			t.file.Close()
		}
		t.mu.Unlock()
	})
}

// check is doctor's telemetry check: what was captured, and each sink's
// delivered, dropped (its buffer full) and failed (a batch that did not
// arrive) counts. Anything lost is a warning.
func (t *telemetry) check() client.DoctorCheck {
	c := client.DoctorCheck{Name: "telemetry", Status: client.CheckOK}
	t.mu.Lock()
	logDropped := t.logDropped
	t.mu.Unlock()
	t.gate.RLock()
	sinks, retired := slices.Clone(t.sinks), slices.Clone(t.retired)
	t.gate.RUnlock()
	lost := logDropped
	c.Detail = fmt.Sprintf("%d events captured, %d sinks; log %s", t.captured.Load(), len(sinks), t.logPath)
	if logDropped > 0 {
		c.Items = append(c.Items, fmt.Sprintf("log: %d events not written (the log is at its %d-byte limit or cannot be written)", logDropped, TelemetryLogLimit))
	}
	for i, s := range append(sinks, retired...) {
		d, f := s.dropped.Load(), s.failed.Load()
		lost += d + f
		was := ""
		if i >= len(sinks) {
			was = " (a sink until a reload removed it)"
		}
		c.Items = append(c.Items, fmt.Sprintf("%s%s: %d delivered, %d dropped (buffer full), %d failed", s.name, was, s.delivered.Load(), d, f))
	}
	if lost > 0 {
		c.Status, c.Code = client.CheckWarn, CodeTelemetryDropped
	}
	return c
}

// telemetryRecorder is a package service's way into the daemon's
// pipeline, which compose makes after the services.
type telemetryRecorder struct{ d *Daemon }

func (r telemetryRecorder) RecordTelemetry(ctx context.Context, ev protocol.TelemetryEvent) error {
	if r.d.telemetry == nil {
		return protocol.NewError(protocol.CodeUnsupported, "no telemetry log here")
	}
	return r.d.telemetry.RecordTelemetry(ctx, ev)
}

var _ host.TelemetryRecorder = telemetryRecorder{}

// startTelemetry makes and starts the pipeline over the composed
// packages: every package whose manifest holds telemetry.sink is a sink,
// delivered to through the process that runs it when the batch goes, so a
// package a reload restarted gets its batches in its new process. A sink
// that is starting or restarting is waited for within the batch's deadline
// (its own events, captured in its configure, reach it once it runs); one
// refused or closed fails the batch at once.
func (d *Daemon) startTelemetry() {
	t := newTelemetry(filepath.Join(LogDir(d.opts.StateDir), TelemetryLogFile), d.opts.Clock.Now, d.log)
	t.deliver = func(ctx context.Context, name string, batch []protocol.TelemetryEvent) error {
		pr, err := d.pkgRun(name)
		if err != nil {
			return err
		}
		proc, _, _ := pr.parts()
		return proc.Call(ctx, "telemetry.sink", protocol.TelemetrySinkParams{Events: batch}, &protocol.TelemetrySinkResult{})
	}
	t.setSinks(d.sinkNames())
	t.start()
	d.telemetry = t
}

// sinkNames are the admitted packages whose manifests hold telemetry.sink.
func (d *Daemon) sinkNames() []string {
	var names []string
	for _, pr := range d.packages() {
		if pr.pkg.Manifest.Enabled("telemetry.sink") {
			names = append(names, pr.pkg.Name)
		}
	}
	return names
}
