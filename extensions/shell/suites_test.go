package shell_test

import "testing"

// TestExecutorSuite runs the shared executor suite against the shell executor, hosted
// in process and as a host.Process.
func TestExecutorSuite(t *testing.T) { executor.TestExecutorSuite(t) }

// TestExecutorSuiteCatchesAWeakenedShell: a shell executor made to adopt
// whatever metadata it is given fails the suite that passes the real one.
func TestExecutorSuiteCatchesAWeakenedShell(t *testing.T) {
	executor.TestExecutorSuiteCatchesCredulous(t)
}
