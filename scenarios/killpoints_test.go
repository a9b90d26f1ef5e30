package scenarios_test

import (
	"io/fs"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host/daemon"
	"github.com/open-conduit/open-conduit/scenarios"
	"github.com/open-conduit/open-conduit/scenarios/drill"
)

// armedPoint is a kill point a drill arms: OPEN_CONDUIT_KILL_POINT=NAME,
// with an optional @SUBJECT and :N.
var armedPoint = regexp.MustCompile(daemon.KillPointEnv + `=([a-z.]+)(@[^:\s]+)?(:[0-9]+)?`)

// TestDrillsArmEveryKillPoint: every kill point the daemon has is armed by
// some drill, or by the kill-point soak (drill.DefaultKillPoints), so a
// new point cannot go undrilled; and no drill arms a point the daemon
// does not have.
func TestDrillsArmEveryKillPoint(t *testing.T) {
	files, err := fs.Glob(scenarios.Drills, "testdata/drills/*.txtar")
	require.NoError(t, err)
	armedBy := map[string][]string{}
	for _, f := range files {
		b, err := fs.ReadFile(scenarios.Drills, f)
		require.NoError(t, err)
		for _, m := range armedPoint.FindAllStringSubmatch(string(b), -1) {
			armedBy[m[1]] = append(armedBy[m[1]], f)
		}
	}
	var names []string
	for _, p := range daemon.KillPoints {
		names = append(names, p.Name)
		soaked := slices.Contains(drill.DefaultKillPoints, p.Name)
		assert.True(t, soaked || len(armedBy[p.Name]) > 0, "no drill arms kill point %s (%s)", p.Name, p.Doc)
	}
	for name, by := range armedBy {
		assert.Contains(t, names, name, "%v arm a kill point the daemon does not have", by)
	}
}
