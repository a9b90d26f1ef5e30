package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/open-conduit/open-conduit/prototypes/transport/workload"
)

// The figures whose single samples this shared machine moves most, the
// echo latency and the cold start, are taken for every transport
// together, interleaved, so that a burst of load elsewhere falls on all of
// them rather than on whichever ran at the time:
//
//   - echo: one session per transport, each warmed up by the same number
//     of unmeasured echoes, then rounds of echoBlock sequential echoes, one
//     block per transport per round, the order rotated every round so no
//     transport always follows the same one. The host's heap is collected
//     before each block and the collector is off during it (a collection
//     inside a block would be charged to whichever transport ran it); the
//     collections that ran anyway are counted (EchoGCs). p50 and p99 are
//     over every round's samples pooled; EchoRoundP50US keeps each round's
//     p50 so a reader sees how much the rounds agree. The CPU each echo
//     costs the host and the extension process is counted too: on a
//     loaded machine a latency includes waiting for a CPU, the CPU time
//     does not.
//   - cold start: coldStarts fresh copies of each binary, started in
//     rotated order, the median taken.
const (
	echoWarmup = 1000
	echoBlock  = 500
	coldStarts = 5
)

// measureInterleaved fills in the cold start and the echo figures of fs
// (one per transport of ts, in the same order).
func measureInterleaved(ctx context.Context, ts []*transport, fs []Figures, echoN int) error {
	colds := make([][]time.Duration, len(ts))
	for k := range coldStarts {
		for j := range ts {
			i := (j + k) % len(ts)
			d, err := coldStart(ctx, ts[i])
			if err != nil {
				return fmt.Errorf("%s: cold start: %w", ts[i].name, err)
			}
			colds[i] = append(colds[i], d)
		}
	}
	for i := range ts {
		fs[i].ColdStartUS = us(median(colds[i]))
	}

	sessions := make([]session, len(ts))
	defer func() {
		for _, s := range sessions {
			if s != nil {
				_ = s.close()
			}
		}
	}()
	for i, t := range ts {
		s, err := t.start(ctx, t.binary, []int{workload.Version})
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		sessions[i] = s
	}
	for i, s := range sessions {
		if err := echoes(ctx, s, 9, echoWarmup); err != nil {
			return fmt.Errorf("%s: warm-up: %w", ts[i].name, err)
		}
	}
	rounds := max(1, echoN/echoBlock)
	lat := make([][]time.Duration, len(ts))
	for i := range ts {
		fs[i].EchoRounds = rounds
	}
	block := make([]time.Duration, echoBlock)
	for k := range rounds {
		fmt.Fprintf(os.Stderr, "\rechoes: round %d of %d", k+1, rounds)
		for j := range ts {
			i := (j + k) % len(ts)
			pid := sessions[i].pid()
			hostCPU, extCPU := selfCPU(), processCPU(pid)
			gcs, err := echoBlockOnce(ctx, sessions[i], block, k*echoBlock)
			if err != nil {
				fmt.Fprintln(os.Stderr)
				return fmt.Errorf("%s: echo: %w", ts[i].name, err)
			}
			hostCPU, extCPU = selfCPU()-hostCPU, processCPU(pid)-extCPU
			fs[i].EchoHostCPUUS += us(hostCPU) / float64(rounds*echoBlock)
			fs[i].EchoExtCPUUS += us(extCPU) / float64(rounds*echoBlock)
			fs[i].EchoGCs += gcs
			lat[i] = append(lat[i], block...)
			fs[i].EchoRoundP50US = append(fs[i].EchoRoundP50US, us(median(slices.Clone(block))))
		}
	}
	fmt.Fprintln(os.Stderr)
	for i := range ts {
		slices.Sort(lat[i])
		fs[i].EchoP50US = us(lat[i][len(lat[i])/2])
		fs[i].EchoP99US = us(lat[i][len(lat[i])*99/100])
	}
	return nil
}

// coldStart is the first launch of a fresh copy of t's binary, which the
// OS has not run, through the handshake.
func coldStart(ctx context.Context, t *transport) (time.Duration, error) {
	fresh, err := freshCopy(t.binary)
	if err != nil {
		return 0, err
	}
	defer os.Remove(fresh)
	start := time.Now()
	s, err := t.start(ctx, fresh, []int{workload.Version})
	if err != nil {
		return 0, err
	}
	d := time.Since(start)
	_ = s.close()
	return d, nil
}

// echoBlockOnce times len(lat) sequential echoes into lat, the host's heap
// collected before and its collector off during them; it returns how many
// collections ran during the block anyway.
func echoBlockOnce(ctx context.Context, s session, lat []time.Duration, seq0 int) (uint32, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	old := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(old)
	in := workload.EchoParams{Text: workload.EchoText}
	var out workload.EchoParams
	for i := range lat {
		in.Seq = seq0 + i
		start := time.Now()
		if err := s.call(ctx, workload.MethodEcho, in, &out); err != nil {
			return 0, err
		}
		lat[i] = time.Since(start)
		if out.Seq != in.Seq || out.Text != in.Text {
			return 0, fmt.Errorf("echo %d came back as %+v", in.Seq, out)
		}
	}
	runtime.ReadMemStats(&after)
	return after.NumGC - before.NumGC, nil
}
