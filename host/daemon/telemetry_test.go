package daemon

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/protocol"
)

var telemetryT0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func newTestTelemetry(t *testing.T) *telemetry {
	t.Helper()
	tel := newTelemetry(filepath.Join(t.TempDir(), TelemetryLogFile), func() time.Time { return telemetryT0 }, slog.New(slog.DiscardHandler))
	t.Cleanup(tel.close)
	return tel
}

func logLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}

// TestTelemetryBufferDropsWhenFullAndCounts: a sink that does not keep up
// (its delivery held by the test) fills its buffer; every further event
// is dropped for it and counted, and recording never waits for it. A sink
// that keeps up gets every event, and the log has them all.
func TestTelemetryBufferDropsWhenFullAndCounts(t *testing.T) {
	tel := newTestTelemetry(t)

	entered, release := make(chan struct{}), make(chan struct{})
	slowGot := make(chan []protocol.TelemetryEvent, 16)
	first := true
	slow := tel.addSink("slow", 4, func(ctx context.Context, batch []protocol.TelemetryEvent) error {
		if first {
			first = false
			close(entered)
			<-release
		}
		slowGot <- batch
		return nil
	})
	fastGot := make(chan []protocol.TelemetryEvent, 16)
	// The fast sink's buffer holds every event, however late its loop runs.
	fast := tel.addSink("fast", 16, func(_ context.Context, batch []protocol.TelemetryEvent) error {
		fastGot <- batch
		return nil
	})
	tel.start()

	record := func(name string) {
		require.NoError(t, tel.RecordTelemetry(t.Context(), protocol.TelemetryEvent{Name: name, Extension: "mine"}))
	}
	record("e0")
	<-entered // the slow sink holds e0 in its delivery; its buffer is empty
	for i := 1; i <= 4+3; i++ {
		record("e") // 4 fill the slow sink's buffer, 3 find it full
	}
	assert.Equal(t, int64(3), slow.dropped.Load(), "the events past the buffer are dropped and counted")

	c := tel.check()
	assert.Equal(t, client.CheckWarn, c.Status)
	assert.Equal(t, CodeTelemetryDropped, c.Code)
	assert.Contains(t, c.Items, "slow: 0 delivered, 3 dropped (buffer full), 0 failed")

	close(release)
	for n := 0; n < 5; {
		n += len(<-slowGot)
	}
	for n := 0; n < 8; {
		batch := <-fastGot
		for _, ev := range batch {
			assert.Equal(t, telemetryT0, ev.Time, "stamped with the daemon's clock")
		}
		n += len(batch)
	}
	tel.close()
	assert.Equal(t, int64(5), slow.delivered.Load())
	assert.Equal(t, int64(8), fast.delivered.Load())
	assert.Zero(t, fast.dropped.Load())
	assert.Equal(t, int64(8), tel.captured.Load())
	assert.Equal(t, 8, logLines(t, tel.logPath), "every captured event is in the telemetry log")
	assert.Contains(t, tel.check().Items, "slow: 5 delivered, 3 dropped (buffer full), 0 failed")
}

// TestTelemetryFailedBatchIsCounted: a batch the sink refuses is lost
// with accounting, and the next ones are still delivered.
func TestTelemetryFailedBatchIsCounted(t *testing.T) {
	tel := newTestTelemetry(t)
	answered := make(chan struct{}, 4)
	fails := true
	s := tel.addSink("flaky", TelemetryBuffer, func(context.Context, []protocol.TelemetryEvent) error {
		defer func() { answered <- struct{}{} }()
		if fails {
			fails = false
			return errors.New("crashed")
		}
		return nil
	})
	tel.start()
	require.NoError(t, tel.RecordTelemetry(t.Context(), protocol.TelemetryEvent{Name: "a"}))
	<-answered
	require.NoError(t, tel.RecordTelemetry(t.Context(), protocol.TelemetryEvent{Name: "b"}))
	<-answered
	tel.close()
	assert.Equal(t, int64(1), s.failed.Load())
	assert.Equal(t, int64(1), s.delivered.Load())
	assert.Equal(t, CodeTelemetryDropped, tel.check().Code)
}

// TestTelemetryLogIsBounded: past TelemetryLogLimit an event is not
// written, and counted; sinks still get it.
func TestTelemetryLogIsBounded(t *testing.T) {
	old := TelemetryLogLimit
	TelemetryLogLimit = 200
	t.Cleanup(func() { TelemetryLogLimit = old })
	tel := newTestTelemetry(t)
	for range 5 {
		require.NoError(t, tel.RecordTelemetry(t.Context(), protocol.TelemetryEvent{Name: "an.event.of.some.length", Extension: "mine"}))
	}
	tel.close()
	info, err := os.Stat(tel.logPath)
	require.NoError(t, err)
	assert.LessOrEqual(t, info.Size(), TelemetryLogLimit)
	lines := logLines(t, tel.logPath)
	assert.Less(t, lines, 5)
	assert.Equal(t, int64(5-lines), tel.logDropped)
	assert.Equal(t, client.CheckWarn, tel.check().Status)
}

// TestTelemetryRefusedAfterClose: a capture during shutdown is refused,
// not lost silently.
func TestTelemetryRefusedAfterClose(t *testing.T) {
	tel := newTestTelemetry(t)
	tel.start()
	tel.close()
	err := tel.RecordTelemetry(t.Context(), protocol.TelemetryEvent{Name: "late"})
	assert.ErrorIs(t, err, protocol.ErrShuttingDown)
}

// TestTelemetryCloseFlushesTheBuffers: what a sink's buffer holds when the
// daemon closes is delivered before close returns, not lost.
func TestTelemetryCloseFlushesTheBuffers(t *testing.T) {
	tel := newTestTelemetry(t)
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	s := tel.addSink("held", TelemetryBuffer, func(context.Context, []protocol.TelemetryEvent) error {
		if first {
			first = false
			close(entered)
			<-release
		}
		return nil
	})
	tel.start()
	require.NoError(t, tel.RecordTelemetry(t.Context(), protocol.TelemetryEvent{Name: "a"}))
	<-entered
	for range 3 {
		require.NoError(t, tel.RecordTelemetry(t.Context(), protocol.TelemetryEvent{Name: "b"}))
	}
	closed := make(chan struct{})
	go func() { tel.close(); close(closed) }()
	close(release)
	<-closed
	assert.Equal(t, int64(4), s.delivered.Load(), "every buffered event was delivered")
	assert.Zero(t, s.dropped.Load()+s.failed.Load())
}

// TestTelemetrySinksFollowSetSinks: setSinks (a package reload) keeps a
// sink still named with its buffer and counts, starts one new to it and
// stops one no longer named, counting what that one's buffer held as
// failed; a removed sink stays in the check's accounting.
func TestTelemetrySinksFollowSetSinks(t *testing.T) {
	tel := newTestTelemetry(t)
	got := map[string]chan protocol.TelemetryEvent{
		"kept": make(chan protocol.TelemetryEvent, 16), "gone": make(chan protocol.TelemetryEvent, 16), "new": make(chan protocol.TelemetryEvent, 16)}
	entered, release := make(chan struct{}), make(chan struct{})
	tel.deliver = func(_ context.Context, name string, batch []protocol.TelemetryEvent) error {
		if name == "gone" && batch[0].Name == "e0" {
			close(entered)
			<-release
		}
		for _, ev := range batch {
			got[name] <- ev
		}
		return nil
	}
	tel.setSinks([]string{"kept", "gone"})
	tel.start()
	record := func(name string) {
		require.NoError(t, tel.RecordTelemetry(t.Context(), protocol.TelemetryEvent{Name: name}))
	}
	record("e0")
	<-entered // gone holds e0 in its delivery
	record("e1")
	record("e2") // in gone's buffer
	tel.setSinks([]string{"kept", "new"})
	record("e3")
	close(release)
	tel.close()

	names := func(name string) []string {
		var out []string
		for len(got[name]) > 0 {
			out = append(out, (<-got[name]).Name)
		}
		return out
	}
	assert.Equal(t, []string{"e0", "e1", "e2", "e3"}, names("kept"), "a kept sink gets every event")
	assert.Equal(t, []string{"e3"}, names("new"), "a new sink gets the events since it was added")
	assert.Equal(t, []string{"e0"}, names("gone"), "a removed sink gets nothing more")
	c := tel.check()
	assert.Equal(t, CodeTelemetryDropped, c.Code, "the removed sink's buffered events are accounted as lost")
	assert.Contains(t, c.Detail, "2 sinks")
	assert.Contains(t, c.Items, "gone (a sink until a reload removed it): 1 delivered, 0 dropped (buffer full), 2 failed")
	assert.Contains(t, c.Items, "kept: 4 delivered, 0 dropped (buffer full), 0 failed")
	assert.Contains(t, c.Items, "new: 1 delivered, 0 dropped (buffer full), 0 failed")
}
