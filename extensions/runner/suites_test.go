package runner_test

import "testing"

// TestExecutorSuite runs the shared executor suite against runner, hosted
// in process and as a host.Process.
func TestExecutorSuite(t *testing.T) { executor.TestExecutorSuite(t) }

// TestExecutorSuiteCatchesWeakenedRunner: a runner made to adopt
// whatever metadata it is given fails the suite that passes the real one.
func TestExecutorSuiteCatchesWeakenedRunner(t *testing.T) {
	executor.TestExecutorSuiteCatchesCredulous(t)
}
