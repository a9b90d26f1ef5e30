package shell_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/extensions/shell"
	"github.com/open-conduit/open-conduit/internal/packagetest"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// TestPackageChecksInProcess runs the conformance package checks that
// mean something in process against shell attached to the real host:
// handshake, version refusal, manifest, shutdown, cancellation (of an
// executor.wait), stdin EOF of a spare, and the executor checks, whose
// restart is a fresh executor value adopting its runs.
func TestPackageChecksInProcess(t *testing.T) {
	packagetest.RunInProcess(t, ".", shell.Extension)
}

// TestPackageChecksAsProcess runs every package check against shell as a
// subprocess under the real host (certify's host-backed driver), this
// test binary serving it as open-conduit extension-run shell would.
func TestPackageChecksAsProcess(t *testing.T) {
	packagetest.RunAsProcess(t, ".", "")
}

// TestInProcessPackageChecksCatchAnAmnesiacShell: in process, the
// executor lifecycle check fails an executor that refuses to adopt the runs
// it started before its restart.
func TestInProcessPackageChecksCatchAnAmnesiacShell(t *testing.T) {
	amnesiac := func() *sdk.Extension {
		ext := shell.Extension()
		e := ext.Executors[shell.Name]
		e.Recover = func(context.Context, *sdk.Host, protocol.ExecutorRecoverParams) (protocol.ExecutorRecoverResult, error) {
			return protocol.ExecutorRecoverResult{}, protocol.Errorf(protocol.CodeNotAdoptable, "remembers nothing")
		}
		ext.Executors[shell.Name] = e
		return ext
	}
	state := t.TempDir()
	t.Cleanup(func() { killAllJobs(filepath.Join(state, "executors", shell.Name)) })
	d, err := packagetest.Start(testContext(t), packagetest.Config{Dir: ".", New: amnesiac, StateDir: state})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	err = conformance.CheckPackageExecutorLifecycle(testContext(t), d)
	require.Error(t, err, "the check passed an executor that adopts nothing")
	assert.Contains(t, err.Error(), "did not adopt its run")
}
