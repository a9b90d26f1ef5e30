package schedule_test

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/schedule"
	"github.com/open-conduit/open-conduit/internal/packagetest"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// TestPackageChecksInProcess runs the conformance package checks that
// mean something in process against schedule attached to the real host.
func TestPackageChecksInProcess(t *testing.T) {
	packagetest.RunInProcess(t, ".", schedule.Extension)
}

// TestPackageChecksAsProcess runs every package check against schedule as
// a subprocess under the real host (certify's host-backed driver), this
// test binary serving it as open-conduit extension-run schedule would.
func TestPackageChecksAsProcess(t *testing.T) {
	packagetest.RunAsProcess(t, ".", "")
}

// TestBinary runs the standalone binary a third party would build: it
// answers initialize with its manifest, refuses a host with no common
// protocol version, and exits by itself at the end of its input.
func TestBinary(t *testing.T) {
	ctx := testContext(t)
	p, err := sdktest.Start(exec.Command(scheduleBinary(t)), sdktest.New())
	require.NoError(t, err)
	err = p.Conn.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{99}}, nil)
	assert.ErrorIs(t, err, protocol.ErrUnsupportedProtocolVersion)
	var init protocol.InitializeResult
	require.NoError(t, p.Conn.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}, StateDir: t.TempDir()}, &init))
	assert.Equal(t, protocol.Version(1), init.ProtocolVersion)
	assert.JSONEq(t, string(schedule.Extension().Manifest), string(init.Manifest))

	p.Conn.Close()
	require.NoError(t, p.Err(), "end of input ends the process cleanly")
	assert.ErrorIs(t, p.Conn.Call(ctx, "route.match", protocol.RouteMatchParams{}, nil), jsonrpc.ErrTransport)
}
