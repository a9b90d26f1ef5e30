package main

import (
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/host/daemon"
	"github.com/open-conduit/open-conduit/runtime"
)

// testClockFlag is serve's --test-clock: alone, a manual clock standing
// at the time serve starts; --test-clock=TIME, standing at TIME (RFC 3339).
type testClockFlag struct {
	set   bool
	start time.Time
}

func (f *testClockFlag) IsBoolFlag() bool { return true }

func (f *testClockFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	if f.start.IsZero() {
		return "true"
	}
	return f.start.Format(time.RFC3339Nano)
}

func (f *testClockFlag) Set(v string) error {
	switch v {
	case "true":
		f.set, f.start = true, time.Time{}
	case "false":
		f.set, f.start = false, time.Time{}
	default:
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return fmt.Errorf("%q is not an RFC 3339 time such as 2026-01-05T08:30:00Z", v)
		}
		f.set, f.start = true, t
	}
	return nil
}

// clock is the daemon's clock: nil (the system clock) without the flag.
func (f *testClockFlag) clock() runtime.Clock {
	if !f.set {
		return nil
	}
	start := f.start
	if start.IsZero() {
		start = time.Now().UTC()
	}
	return daemon.NewManualClock(start)
}
