//go:build linux

package runtime_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/runtime"
)

// rusageThread is Linux's RUSAGE_THREAD: the calling thread's usage.
const rusageThread = 1

func threadCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStartCPU is BenchmarkEngineRatios's start_x as CPU time: the
// same two sides (a bare synced Work write, an Execution start), each
// interleaved in one loop on stores of their own, timed by the CPU the
// benchmark's thread spent (it is locked to one OS thread, and the store
// runs on the caller's), beside the wall time. On a shared machine the
// wall ratio moves with the disk's fsync latency and the run queue; the
// CPU ratio (cpu_x) is what the store's statements and pages cost.
func BenchmarkStartCPU(b *testing.B) {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	ctx := context.Background()
	starting := newStartingHarness(b)
	writing := newHarness(b, runtime.Config{})
	written := putWork(b, writing, pendingWork("w"))
	var writeCPU, startCPU, writeWall, startWall time.Duration
	b.ResetTimer()
	for i := range b.N {
		c, t := threadCPU(b), time.Now()
		written = putWork(b, writing, written)
		writeCPU += threadCPU(b) - c
		writeWall += time.Since(t)
		putWork(b, starting, pendingWork(fmt.Sprint("w", i)))
		c, t = threadCPU(b), time.Now()
		xs, err := starting.engine.StartPending(ctx)
		startCPU += threadCPU(b) - c
		startWall += time.Since(t)
		if err != nil || len(xs) != 1 {
			b.Fatal(len(xs), err)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(writeCPU.Microseconds())/n, "cpuµs/write")
	b.ReportMetric(float64(startCPU.Microseconds())/n, "cpuµs/start")
	b.ReportMetric(startCPU.Seconds()/writeCPU.Seconds(), "cpu_x")
	b.ReportMetric(float64(writeWall.Microseconds())/n, "µs/write")
	b.ReportMetric(float64(startWall.Microseconds())/n, "µs/start")
	b.ReportMetric(startWall.Seconds()/writeWall.Seconds(), "start_x")
}
