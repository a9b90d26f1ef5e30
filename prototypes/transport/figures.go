package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/prototypes/transport/workload"
)

// Figures are one transport's row of the seed's table. Durations are in
// microseconds; a figure the transport cannot give is zero and printed "-".
type Figures struct {
	Name            string  `json:"name"`
	ColdStartUS     float64 `json:"cold_start_us"`
	WarmRestartUS   float64 `json:"warm_restart_us"`
	VersionRefuseUS float64 `json:"version_mismatch_us"`
	EchoP50US       float64 `json:"echo_p50_us"`
	EchoP99US       float64 `json:"echo_p99_us"`
	// EchoRounds is how many interleaved rounds the echo figures pool,
	// EchoRoundP50US each round's p50, EchoGCs the host's collections
	// during timed echoes (the collector is off then: normally 0).
	EchoRounds     int       `json:"echo_rounds"`
	EchoRoundP50US []float64 `json:"echo_round_p50_us"`
	EchoGCs        uint32    `json:"echo_gcs"`
	// EchoHostCPUUS and EchoExtCPUUS are the CPU time one timed echo cost
	// the host process and the extension process (Linux; 0 elsewhere).
	EchoHostCPUUS float64 `json:"echo_host_cpu_us"`
	EchoExtCPUUS  float64 `json:"echo_extension_cpu_us"`
	CallbackUS    float64 `json:"host_callback_us"`
	ArtifactMiBps float64 `json:"artifact_mib_per_s"`
	CancelSeenUS  float64 `json:"cancel_seen_us"`
	CrashDetectUS float64 `json:"crash_detected_us"`
	BinaryMiB     float64 `json:"binary_mib"`
	ModuleDeps    int     `json:"module_deps"`
}

const (
	artifactBytes = 16 << 20
	artifactChunk = 64 << 10
	cancels       = 20
	crashes       = 3
)

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// measure takes t's figures but the starts, the echo, the host callback
// and the artifact, which measureInterleaved takes for every transport
// together.
func measure(ctx context.Context, t *transport) (Figures, error) {
	f := Figures{Name: t.name}
	st, err := os.Stat(t.binary)
	if err != nil {
		return f, err
	}
	f.BinaryMiB = float64(st.Size()) / (1 << 20)
	if f.ModuleDeps, err = moduleDeps(t.binary); err != nil {
		return f, err
	}

	s, err := t.start(ctx, t.binary, []int{workload.Version})
	if err != nil {
		return f, err
	}
	defer func() { _ = s.close() }()

	if t.floor {
		return f, nil
	}

	// Cancel seen by the extension: from the caller's cancel to the
	// handler's context ending, by the machine's wall clock.
	var seen []time.Duration
	for i := range cancels {
		d, err := cancelOnce(ctx, s, fmt.Sprintf("measure-%d", i))
		if err != nil {
			return f, fmt.Errorf("cancel: %w", err)
		}
		seen = append(seen, d)
	}
	f.CancelSeenUS = us(median(seen))

	// Crash detected: from the call that crashes the extension to its
	// transport error, on fresh sessions.
	var crashed []time.Duration
	for range crashes {
		cs, err := t.start(ctx, t.binary, []int{workload.Version})
		if err != nil {
			return f, err
		}
		d, err := crashOnce(ctx, cs)
		_ = cs.close()
		if err != nil {
			return f, fmt.Errorf("crash: %w", err)
		}
		crashed = append(crashed, d)
	}
	f.CrashDetectUS = us(median(crashed))
	return f, nil
}

// freshCopy copies bin to a new file, which the OS has never run.
func freshCopy(bin string) (string, error) {
	src, err := os.Open(bin)
	if err != nil {
		return "", err
	}
	defer src.Close()
	dst := filepath.Join(filepath.Dir(bin), fmt.Sprintf("%s-cold-%d", filepath.Base(bin), time.Now().UnixNano()))
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		return "", err
	}
	return dst, out.Close()
}

// moduleDeps counts the modules linked into bin beyond the project's own,
// as go version -m lists them.
func moduleDeps(bin string) (int, error) {
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		return 0, err
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "dep" && !strings.HasPrefix(fields[1], "github.com/open-conduit/open-conduit") {
			n++
		}
	}
	return n, sc.Err()
}
