package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/host"
)

// minimalPackages writes n packages p01…pNN whose command runs this test
// binary as a minimal SDK extension, and discovers them.
func minimalPackages(tb testing.TB, n int, mode string) []host.Package {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	root := tb.TempDir()
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("p%02d", i)
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		script := fmt.Sprintf("#!/bin/sh\nexec %q child:%s\n", exe, mode)
		manifest := fmt.Sprintf(`{"name": %q, "version": "1", "command": ["run.sh"], "protocol": [1], "provides": {}}`, name)
		if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte(script), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "open-conduit-extension.json"), []byte(manifest), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	pkgs, problems, err := host.Discover(root)
	if err != nil || len(problems) > 0 || len(pkgs) != n {
		tb.Fatalf("discovered %d packages of %d: %v %v", len(pkgs), n, problems, err)
	}
	return pkgs
}

// openTimed opens a daemon over pkgs and returns how long Open took; the
// daemon is closed untimed.
func openTimed(tb testing.TB, pkgs []host.Package) time.Duration {
	tb.Helper()
	state, err := os.MkdirTemp("", "oc")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(state)
	ctx := context.Background()
	start := time.Now()
	d, err := Open(ctx, Options{ConfigDir: tb.TempDir(), StateDir: state, Packages: append([]host.Package{}, pkgs...), NoAPI: true})
	took := time.Since(start)
	if err != nil {
		tb.Fatal(err)
	}
	st := d.Status(ctx)
	if !st.Ready || len(st.Packages) != len(pkgs) {
		tb.Fatalf("not ready: %+v", st)
	}
	if err := d.Close(ctx); err != nil {
		tb.Fatal(err)
	}
	return took
}

// BenchmarkOpenPackages opens a daemon with no package, one and twenty in
// the same run. The daemon starts its packages at once, so twenty cost
// about the slowest handshake, not the sum: the bound is
// (open20 - open0) ≤ 1.5 × (open1 - open0), reported as ratio-20-to-1.
// handshake=minimal packages spend their handshake on CPU (a process
// start), which twenty processes share with the machine's cores;
// handshake=100ms packages wait in initialize, as an interpreter's start
// or a remote check does.
func BenchmarkOpenPackages(b *testing.B) {
	for _, mode := range []string{"minimal", "slow"} {
		name := "handshake=" + mode
		if mode == "slow" {
			name = "handshake=" + slowHandshake.String()
		}
		b.Run(name, func(b *testing.B) { benchmarkOpen(b, mode) })
	}
}

func benchmarkOpen(b *testing.B, mode string) {
	twenty := minimalPackages(b, 20, mode)
	var t0, t1, t20 time.Duration
	n := 0
	for b.Loop() {
		t0 += openTimed(b, nil)
		t1 += openTimed(b, twenty[:1])
		t20 += openTimed(b, twenty)
		n++
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) }
	b.ReportMetric(per(t0), "ns/open-0")
	b.ReportMetric(per(t1), "ns/open-1")
	b.ReportMetric(per(t20), "ns/open-20")
	if one := per(t1) - per(t0); one > 0 {
		b.ReportMetric((per(t20)-per(t0))/one, "ratio-20-to-1")
	}
}
