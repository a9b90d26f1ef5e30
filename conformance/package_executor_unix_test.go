//go:build unix

package conformance

import (
	"bufio"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The physical-stop evidence executor/controls asks for: a group with a
// running process counts it, and a group whose processes were killed and
// reaped counts none.
func TestGroupRunningSeesAGroupUntilItIsGone(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "trap '' INT TERM; echo ready; exec sleep 60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { killGroup(cmd.Process.Pid) })
	// The line comes once the traps are set, as a controls run's pid file does.
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)

	pgid, err := processGroupOf(cmd.Process.Pid)
	require.NoError(t, err)
	assert.Equal(t, cmd.Process.Pid, pgid)
	n, err := groupRunning(pgid)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the running sleep")

	// SIGTERM is ignored: the group still runs.
	require.NoError(t, syscall.Kill(-pgid, syscall.SIGTERM))
	n, err = groupRunning(pgid)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "a process that ignores SIGTERM")

	killGroup(pgid)
	_ = cmd.Wait()
	n, err = groupRunning(pgid)
	require.NoError(t, err)
	assert.Zero(t, n, "the killed and reaped group")
}

func TestProcessGroupOfRefusesCertificationsOwnGroup(t *testing.T) {
	_, err := processGroupOf(os.Getpid())
	assert.ErrorContains(t, err, "certification's own process group")
	_, err = processGroupOf(1 << 30)
	assert.Error(t, err, "no such process")
}
