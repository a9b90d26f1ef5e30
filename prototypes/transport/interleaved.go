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
//   - host callback: in each round, after its echo block, one request
//     whose handler calls the host back callbacksPerRound times; the
//     median over the rounds of the time per callback.
//   - artifact: after one unmeasured upload per session, artifactUploads
//     uploads of 16 MiB in acknowledged 64 KiB chunks spread over the
//     rounds, timed by the writer from its first chunk to the last one's
//     acknowledgement; the median taken.
//   - starts: in each of startRounds rounds, for each transport in
//     rotated order, a cold start (the first launch of a fresh copy of the
//     binary), a warm restart (the same binary again) and a start that
//     offers only a foreign version, to the refusal; the medians taken.
const (
	echoWarmup        = 1000
	echoBlock         = 500
	callbacksPerRound = 100
	startRounds       = 5
	artifactUploads   = 3
)

// measureInterleaved fills in the start, echo and host callback figures
// of fs (one per transport of ts, in the same order).
func measureInterleaved(ctx context.Context, ts []*transport, fs []Figures, echoN int) error {
	colds, warms, refusals := make([][]time.Duration, len(ts)), make([][]time.Duration, len(ts)), make([][]time.Duration, len(ts))
	for k := range startRounds {
		for j := range ts {
			i := (j + k) % len(ts)
			t := ts[i]
			d, err := coldStart(ctx, t)
			if err != nil {
				return fmt.Errorf("%s: cold start: %w", t.name, err)
			}
			colds[i] = append(colds[i], d)
			start := time.Now()
			s, err := t.start(ctx, t.binary, []int{workload.Version})
			if err != nil {
				return fmt.Errorf("%s: warm restart: %w", t.name, err)
			}
			warms[i] = append(warms[i], time.Since(start))
			_ = s.close()
			if !t.floor {
				start := time.Now()
				if _, err := t.start(ctx, t.binary, []int{workload.BadVersion}); err == nil {
					return fmt.Errorf("%s: a foreign version was accepted", t.name)
				}
				refusals[i] = append(refusals[i], time.Since(start))
			}
		}
	}
	for i := range ts {
		fs[i].ColdStartUS = us(median(colds[i]))
		fs[i].WarmRestartUS = us(median(warms[i]))
		if len(refusals[i]) > 0 {
			fs[i].VersionRefuseUS = us(median(refusals[i]))
		}
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
	for i, s := range sessions {
		if _, err := s.upload(ctx, artifactBytes, artifactChunk, 3); err != nil {
			return fmt.Errorf("%s: artifact: %w", ts[i].name, err)
		}
	}
	uploads := make([][]time.Duration, len(ts))
	rounds := max(1, echoN/echoBlock)
	lat := make([][]time.Duration, len(ts))
	perCallback := make([][]time.Duration, len(ts))
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
			if ts[i].floor {
				continue
			}
			start := time.Now()
			var cb workload.CallbackResult
			if err := sessions[i].call(ctx, workload.MethodCallback, workload.CallbackParams{N: callbacksPerRound}, &cb); err != nil {
				fmt.Fprintln(os.Stderr)
				return fmt.Errorf("%s: host callback: %w", ts[i].name, err)
			}
			perCallback[i] = append(perCallback[i], time.Since(start)/callbacksPerRound)
		}
		if k%max(1, rounds/artifactUploads) == 0 && len(uploads[0]) < artifactUploads {
			for j := range ts {
				i := (j + k) % len(ts)
				up, err := sessions[i].upload(ctx, artifactBytes, artifactChunk, 3)
				if err == nil && (up.ChunksNanos <= 0 || up.Bytes != artifactBytes) {
					err = fmt.Errorf("the writer reported %d bytes in %d ns", up.Bytes, up.ChunksNanos)
				}
				if err != nil {
					fmt.Fprintln(os.Stderr)
					return fmt.Errorf("%s: artifact: %w", ts[i].name, err)
				}
				uploads[i] = append(uploads[i], time.Duration(up.ChunksNanos))
			}
		}
	}
	fmt.Fprintln(os.Stderr)
	for i := range ts {
		slices.Sort(lat[i])
		fs[i].EchoP50US = us(lat[i][len(lat[i])/2])
		fs[i].EchoP99US = us(lat[i][len(lat[i])*99/100])
		fs[i].ArtifactMiBps = float64(artifactBytes) / (1 << 20) / median(uploads[i]).Seconds()
		if len(perCallback[i]) > 0 {
			fs[i].CallbackUS = us(median(perCallback[i]))
		}
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
