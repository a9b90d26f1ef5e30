//go:build unix

package procwatch_test

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol/sdk/procwatch"
)

// startGroup starts a shell in a process group of its own that runs a
// child of its own and waits, as a detached job does.
func startGroup(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 300 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd
}

func TestRunningTellsTheRecordedProcessFromAnother(t *testing.T) {
	cmd := startGroup(t)
	pid := cmd.Process.Pid
	start := procwatch.Identity(pid)
	require.NotZero(t, start, "a live process has a start time in /proc")
	assert.True(t, procwatch.Running(pid, start))
	assert.True(t, procwatch.Running(pid, 0), "an unknown start time trusts the pid")
	assert.False(t, procwatch.Running(pid, start+1), "another start time is another process that reuses the pid")
}

func TestWaitExitAndGroupGone(t *testing.T) {
	cmd := startGroup(t)
	pid := cmd.Process.Pid
	require.True(t, procwatch.GroupAlive(pid))

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, procwatch.WaitExit(ctx, pid), context.DeadlineExceeded, "a live process is waited on until ctx ends")
	assert.False(t, procwatch.WaitGroupGone(ctx, pid), "a live group is not gone when ctx ends")

	require.NoError(t, syscall.Kill(-pid, syscall.SIGKILL))
	ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// The leader stays a zombie until this test reaps it: exited all the same.
	require.NoError(t, procwatch.WaitExit(ctx, pid))
	assert.True(t, procwatch.WaitGroupGone(ctx, pid), "zombies run nothing: the group is gone")
	assert.False(t, procwatch.GroupAlive(pid))
	assert.False(t, procwatch.Running(pid, 0), "a zombie is not running")
}
