package host_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
)

// TestStartRefusesACommandLinkedOutOfThePackage: discovery read a package
// whose command stayed inside it; by the time the host starts it, the
// command is a link out of the package. Start refuses it for good (no
// restart), naming the rule and the field, and nothing runs.
func TestStartRefusesACommandLinkedOutOfThePackage(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("escapee", manifestJSON("escapee", "good", nil, nil))
	ext := filepath.Join(f.root, "escapee", "ext")
	exe, err := os.Executable()
	require.NoError(t, err)
	require.NoError(t, os.Remove(ext))
	require.NoError(t, os.Symlink(exe, ext))

	err = p.Start(ctxT(t))
	require.ErrorIs(t, err, host.ErrRefused)
	assert.ErrorContains(t, err, protocol.RuleCommandSymlink)
	assert.ErrorContains(t, err, "command[0]")
	st, _, _ := p.Status()
	assert.Equal(t, host.Refused, st)
	assert.Zero(t, p.PID(), "nothing was started")
}

// TestPassEnvReservedIsRefused: a grant of an OS_* or OPEN_CONDUIT_*
// variable is refused when the process is set up (pass_env_reserved), and
// Environment never passes one, whatever its caller checked.
func TestPassEnvReservedIsRefused(t *testing.T) {
	f := newFixture(t)
	dir := writePackage(t, f.root, "greedy", manifestJSON("greedy", "good", nil, nil))
	m, err := protocol.LoadManifest(dir)
	require.NoError(t, err)
	for _, grant := range [][]string{{"GRANTED", "OPEN_CONDUIT_CONFIG"}, {"OS_TOKEN"}} {
		_, err := host.NewProcess(host.Config{Package: host.Package{Name: "greedy", Dir: dir, Manifest: m},
			StateRoot: f.state, PassEnv: grant})
		require.Error(t, err, "%v", grant)
		assert.ErrorIs(t, err, protocol.ErrInvalid)
		assert.ErrorContains(t, err, protocol.RulePassEnvReserved)
	}
	got := host.Environment([]string{"PATH=/bin", "OPEN_CONDUIT_CONFIG=/c", "OS_TOKEN=t", "GRANTED=yes"},
		[]string{"GRANTED", "OPEN_CONDUIT_CONFIG", "OS_TOKEN"})
	assert.ElementsMatch(t, []string{"PATH=/bin", "GRANTED=yes"}, got)
}
