package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/host"
)

// minimalPackages writes n packages p01…pNN whose command runs this test
// binary as a minimal SDK extension, and discovers them.
func minimalPackages(tb testing.TB, n int, mode string, args ...string) []host.Package {
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
		script := fmt.Sprintf("#!/bin/sh\nexec %q child:%s %s\n", exe, mode, strings.Join(args, " "))
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

// The daemon starts its packages at once, not one after another: every
// package's initialize waits until all twenty are in theirs, which one
// start at a time could never reach. (The timing of the same, with the
// machine's load in it, is BenchmarkOpenPackages.)
func TestOpenStartsPackagesAtOnce(t *testing.T) {
	const n = 20
	sock := filepath.Join(shortDir(t), "b.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	released := make(chan error, 1)
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for len(conns) < n {
			c, err := l.Accept()
			if err != nil {
				released <- err
				return
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			if _, err := c.Write([]byte{1}); err != nil {
				released <- err
				return
			}
		}
		released <- nil
	}()
	pkgs := minimalPackages(t, n, "barrier", sock)
	d, err := Open(t.Context(), Options{ConfigDir: t.TempDir(), StateDir: shortDir(t), Packages: pkgs, NoAPI: true,
		StartTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.WithoutCancel(t.Context()))
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	st := d.Status(t.Context())
	for _, p := range st.Packages {
		if p.State != "ready" {
			t.Errorf("%s is %s: %s", p.Name, p.State, p.LastError)
		}
	}
	if len(st.Packages) != n {
		t.Fatalf("%d packages", len(st.Packages))
	}
}
