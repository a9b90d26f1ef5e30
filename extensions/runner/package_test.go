package runner_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/extensions/runner"
	"github.com/open-conduit/open-conduit/internal/packagetest"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// TestPackageChecksInProcess runs the conformance package checks that
// mean something in process against runner attached to the real host:
// handshake, version refusal, manifest, shutdown, cancellation (of an
// executor.wait), stdin EOF of a spare, and the executor checks, whose
// restart is a fresh runner value adopting its runs.
func TestPackageChecksInProcess(t *testing.T) {
	packagetest.RunInProcess(t, ".", runner.Extension)
}

// TestPackageChecksAsProcess runs every package check against runner as a
// subprocess under the real host (certify's host-backed driver), this
// test binary serving it as open-conduit extension-run runner would.
func TestPackageChecksAsProcess(t *testing.T) {
	packagetest.RunAsProcess(t, ".", "")
}

// TestInProcessPackageChecksCatchAnAmnesiacRunner: in process, the
// executor lifecycle check fails a runner that refuses to adopt the runs
// it started before its restart.
func TestInProcessPackageChecksCatchAnAmnesiacRunner(t *testing.T) {
	amnesiac := func() *sdk.Extension {
		ext := runner.Extension()
		e := ext.Executors[runner.Name]
		e.Recover = func(context.Context, *sdk.Host, protocol.ExecutorRecoverParams) (protocol.ExecutorRecoverResult, error) {
			return protocol.ExecutorRecoverResult{}, protocol.Errorf(protocol.CodeNotAdoptable, "remembers nothing")
		}
		ext.Executors[runner.Name] = e
		return ext
	}
	state := t.TempDir()
	t.Cleanup(func() { killAllJobs(filepath.Join(state, "executors", runner.Name)) })
	d, err := packagetest.Start(testContext(t), packagetest.Config{Dir: ".", New: amnesiac, StateDir: state})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	err = conformance.CheckPackageExecutorLifecycle(testContext(t), d)
	require.Error(t, err, "the check passed a runner that adopts nothing")
	assert.Contains(t, err.Error(), "did not adopt its run")
}
