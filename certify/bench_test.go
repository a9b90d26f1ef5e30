package certify_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/open-conduit/open-conduit/certify"
	"github.com/open-conduit/open-conduit/protocol"
)

// BenchmarkCertifyNotes certifies notes end to end under the real host.
// Compare it with BenchmarkStartStopNotes, the cost of one supervised
// start and stop of the same package, measured in the same run.
func BenchmarkCertifyNotes(b *testing.B) {
	dir := filepath.Join("..", "extensions", "notes")
	for b.Loop() {
		report, err := certify.Run(context.Background(), certify.Config{Dir: dir, Launch: certify.HostLaunch(openConduit)})
		if err != nil || report.ExitCode() != certify.ExitOK {
			b.Fatalf("certify: %v (exit %d)", err, report.ExitCode())
		}
	}
}

// BenchmarkStartStopNotes is the baseline: launch, handshake and orderly
// stop of notes, once.
func BenchmarkStartStopNotes(b *testing.B) {
	dir := filepath.Join("..", "extensions", "notes")
	m, err := protocol.LoadManifest(dir)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		p, err := certify.HostLaunch(openConduit)(context.Background(), certify.LaunchSpec{Dir: dir, Manifest: m, StateDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := p.Stop(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
