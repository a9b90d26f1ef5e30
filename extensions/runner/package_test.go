package runner_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/certify"
	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/extensions/runner"
	"github.com/open-conduit/open-conduit/internal/packagetest"
	"github.com/open-conduit/open-conduit/protocol"
)

// TestPackageChecksInProcess runs the conformance package checks that
// mean something in process against runner attached to the real host:
// handshake, version refusal, manifest, shutdown, cancellation (of an
// executor.wait), stdin EOF of a spare, and the executor checks, whose
// restart is a fresh runner value adopting its runs.
func TestPackageChecksInProcess(t *testing.T) {
	d, err := packagetest.Start(testContext(t), packagetest.Config{Dir: ".", New: runner.Extension, StateDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	packagetest.Run(t, d, packagetest.InProcessChecks())
}

// TestPackageChecksAsProcess runs every package check against runner as a
// subprocess under the real host (certify's host-backed driver), this
// test binary serving it as open-conduit extension-run runner would.
func TestPackageChecksAsProcess(t *testing.T) {
	m, err := protocol.LoadManifest(".")
	require.NoError(t, err)
	p, err := certify.HostLaunch("")(testContext(t), certify.LaunchSpec{Dir: ".", Manifest: m, StateDir: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, p.Start(testContext(t)))
	t.Cleanup(func() { p.Stop(context.Background()) })
	d, ok := p.(conformance.PackageDriver)
	require.True(t, ok, "certify's host-backed package is a package driver")
	packagetest.Run(t, d, conformance.PackageChecks())
}
