package scenarios_test

import (
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/internal/testbin"
	"github.com/open-conduit/open-conduit/scenarios/drill"
)

// TestDrills replays every embedded drill (the copies the binary's drill
// run replays) against the built binary; -run TestDrills/NAME runs one.
func TestDrills(t *testing.T) {
	testbin.StatInputs(t, "..")
	files, err := drill.Extract(t.TempDir())
	require.NoError(t, err)
	p := drill.Params(drill.Options{Binary: filepath.Join(binDir, "open-conduit")})
	p.Files = files
	testscript.Run(t, p)
}

// TestSoak kills the daemon with SIGKILL 20 times under webhook load from
// four senders and wants every acknowledged delivery stored once, nothing
// accepted twice and the store intact. open-conduit drill soak runs more.
func TestSoak(t *testing.T) {
	rep, err := drill.Soak(t.Context(), drill.SoakOptions{Binary: filepath.Join(binDir, "open-conduit"), Rounds: 20})
	require.NoError(t, err)
	t.Logf("seed %d: %d kills, sent %d, acknowledged %d (%d deliveries), stored %d, lost %d, duplicated %d, integrity %s, %.1fs",
		rep.Seed, rep.Kills, rep.Sent, rep.Acknowledged, rep.Deliveries, rep.Stored, rep.Lost, rep.Duplicated, rep.Integrity, rep.Elapsed)
	assert.Equal(t, 20, rep.Kills+rep.KillPointKills, "every round ended in a kill")
	assert.Positive(t, rep.Acknowledged, "the load was acknowledged at all")
	assert.Equal(t, rep.Deliveries, rep.Stored, "every acknowledged delivery is stored")
	assert.Zero(t, rep.Lost)
	assert.Zero(t, rep.Duplicated)
	assert.Empty(t, rep.Unexpected)
	assert.Equal(t, "ok", rep.Integrity)
	assert.True(t, rep.Passed())
}
