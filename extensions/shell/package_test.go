package shell_test

import "testing"

// TestPackageChecksInProcess runs the conformance package checks that
// mean something in process against shell attached to the real host:
// handshake, version refusal, manifest, shutdown, cancellation (of an
// executor.wait), stdin EOF of a spare, and the executor checks, whose
// restart is a fresh the shell executor value adopting its runs.
func TestPackageChecksInProcess(t *testing.T) { executor.TestPackageChecksInProcess(t) }

// TestPackageChecksAsProcess runs every package check against shell as a
// subprocess under the real host (certify's host-backed driver), this
// test binary serving it as open-conduit extension-run shell would.
func TestPackageChecksAsProcess(t *testing.T) { executor.TestPackageChecksAsProcess(t) }

// TestInProcessPackageChecksCatchAnAmnesiacShell: in process, the
// executor lifecycle check fails a shell executor that refuses to adopt the runs it
// started before its restart.
func TestInProcessPackageChecksCatchAnAmnesiacShell(t *testing.T) {
	executor.TestInProcessPackageChecksCatchAnAmnesiac(t)
}
