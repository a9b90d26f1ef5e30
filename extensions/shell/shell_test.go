package shell_test

import "testing"

// The bodies of these tests are the executor test kit's, run in each of
// its modes (in process, over a pipe, as a child process).

func TestRunWaitInject(t *testing.T)  { executor.TestRunWaitInject(t) }
func TestInterrupt(t *testing.T)      { executor.TestInterrupt(t) }
func TestStop(t *testing.T)           { executor.TestStop(t) }
func TestPersistRefusal(t *testing.T) { executor.TestPersistRefusal(t) }

// TestRecover restarts the shell executor (in process: a fresh value; as a process:
// SIGKILL to it) while a job runs, and adopts the job from its persisted
// metadata in the new one.
func TestRecover(t *testing.T) { executor.TestRecover(t) }

// TestRecoverRefusesMetadataOutsideItsRunsDirectory: metadata naming
// any directory but the run's own under the runs directory, or its own
// directory with other processes than it records, is not adopted.
func TestRecoverRefusesMetadataOutsideItsRunsDirectory(t *testing.T) {
	executor.TestRecoverRefusesMetadataOutsideItsRunsDirectory(t)
}

// TestStopUnadopted stops a running job that no shell executor process holds, from
// the metadata its directory keeps.
func TestStopUnadopted(t *testing.T) { executor.TestStopUnadopted(t) }
