package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/internal/daemontest"
	"github.com/open-conduit/open-conduit/protocol"
)

// BenchmarkServeReady measures `serve` from exec to ready (the ready line
// printed and status answering, every package configured) with notes and
// runner installed, and in the same run one bare handshake of notes (its
// process started, initialize and configure answered) on the same binary;
// ratio-to-handshake is the first over the second.
func BenchmarkServeReady(b *testing.B) {
	bin := daemonBinary(b)
	m, err := protocol.LoadManifest(notesDir)
	if err != nil {
		b.Fatal(err)
	}
	var serve, handshake time.Duration
	n := 0
	for b.Loop() {
		cfg, state := daemontest.TempDir(b), daemontest.TempDir(b)
		for _, p := range []string{notesDir, runnerDir} {
			if err := daemontest.Install(cfg, p); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		d, err := daemontest.Launch(b, daemontest.Options{Binary: bin, ConfigDir: cfg, StateDir: state})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.WaitReady(context.Background()); err != nil {
			b.Fatal(err)
		}
		serve += time.Since(start)
		if err := d.Stop(); err != nil {
			b.Fatal(err)
		}

		root := daemontest.TempDir(b)
		proc, err := host.NewProcess(host.Config{Package: host.Package{Name: m.Name, Dir: notesDir, Manifest: m},
			StateRoot: root, Executable: bin})
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if err := proc.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		handshake += time.Since(start)
		if err := proc.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		os.RemoveAll(root)
		n++
	}
	b.ReportMetric(float64(serve.Nanoseconds())/float64(n), "ns/serve-ready")
	b.ReportMetric(float64(handshake.Nanoseconds())/float64(n), "ns/notes-handshake")
	b.ReportMetric(float64(serve)/float64(handshake), "ratio-to-handshake")
}
