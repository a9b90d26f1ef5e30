package procwatch_test

import (
	"os/exec"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol/sdk/procwatch"
)

// A zombie runs nothing: a group whose only process exited, not yet
// reaped, counts as gone, though the kernel still signals it.
func TestGroupRunningDoesNotCountAZombie(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Wait() }()
	pid := cmd.Process.Pid

	// waitid(P_PID, pid, WEXITED|WNOWAIT) returns once it exited and
	// leaves it unreaped.
	const pPID, wEXITED, wNOWAIT = 1, 4, 0x01000000
	var info [128]byte
	_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wEXITED|wNOWAIT, 0, 0)
	require.Zero(t, errno)
	require.NoError(t, syscall.Kill(-pid, 0), "the zombie's group is still signalled")

	assert.Zero(t, procwatch.GroupRunning(pid))
	assert.False(t, procwatch.GroupAlive(pid))
}
