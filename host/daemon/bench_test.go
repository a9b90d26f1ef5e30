package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/host"
)

// minimalPackages writes n packages p01…pNN whose command is the small
// SDK extension testdata/minimalext in mode (minimal, slow or barrier, with
// args), and discovers them. A small binary rather than this test binary,
// so a start costs what the daemon does and what a small extension costs,
// not the start-up of a test binary that links the whole store.
func minimalPackages(tb testing.TB, n int, mode string, args ...string) []host.Package {
	tb.Helper()
	exe := minimalExtension(tb)
	root := tb.TempDir()
	command, _ := json.Marshal(append([]string{"minimalext", mode}, args...))
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("p%02d", i)
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		// A hard link stays inside the package as far as the link check
		// goes (a symlink out of the package is refused).
		if err := os.Link(exe, filepath.Join(dir, "minimalext")); err != nil {
			tb.Fatal(err)
		}
		manifest := fmt.Sprintf(`{"name": %q, "version": "1", "command": %s, "protocol": [1], "provides": {}}`, name, command)
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

// slowHandshake is how long a "slow" minimalext takes to initialize
// (its own constant of the same name).
const slowHandshake = 100 * time.Millisecond

var (
	minimalOnce sync.Once
	minimalDir  string
	minimalPath string
	minimalErr  error
)

// minimalExtension builds testdata/minimalext once per test binary (its
// directory is removed by TestMain).
func minimalExtension(tb testing.TB) string {
	tb.Helper()
	minimalOnce.Do(func() {
		if minimalDir, minimalErr = os.MkdirTemp("", "oc-minimal"); minimalErr != nil {
			return
		}
		minimalPath = filepath.Join(minimalDir, "minimalext")
		out, err := exec.Command("go", "build", "-o", minimalPath, "./testdata/minimalext").CombinedOutput()
		if err != nil {
			minimalErr = fmt.Errorf("go build ./testdata/minimalext: %v\n%s", err, out)
		}
	})
	if minimalErr != nil {
		tb.Fatal(minimalErr)
	}
	return minimalPath
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
