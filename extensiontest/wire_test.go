package extensiontest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/notes"
	et "github.com/open-conduit/open-conduit/extensiontest"
)

// TestFailureShowsTheStepsWire: a failing step's evidence holds the wire
// lines it caused (its delivery's webhook.handle, by the name of a header
// only that delivery carries: the wire log keeps header names, not their
// values) and none of an earlier step's, and the wire logs the
// daemon wrote hold the secret.resolve the first delivery made without
// the secret it answered, and the agent's runs without their toolbelt
// tokens.
func TestFailureShowsTheStepsWire(t *testing.T) {
	t.Parallel()
	marked := func(id, mark string) *et.Webhook {
		w := delivery(id, "Hello "+id)
		w.Header = map[string]string{mark: "1"}
		return w
	}
	c := notesCase(
		et.Step{Name: "an earlier delivery", Webhook: marked("n1", "X-Et-Earlier-Step"),
			Expect: []et.Check{et.ExpectEvent(et.EventMatch{Family: notes.FamilyNote})}},
		et.Step{Name: "a delivery expecting what never happens", Webhook: marked("n2", "X-Et-Failing-Step"),
			Expect: []et.Check{et.ExpectEvent(et.EventMatch{Family: notes.FamilyNote, Type: "never"})}},
	)
	c.Timeout = 2 * time.Second
	err := et.Run(t, c)
	var serr *et.StepError
	require.ErrorAs(t, err, &serr)
	t.Cleanup(func() { os.RemoveAll(serr.Dir) })
	require.Equal(t, 2, serr.Step, err.Error())

	wire := section(t, serr.Evidence, "--- wire (package notes, this step")
	assert.Contains(t, wire, `"method":"webhook.handle"`)
	assert.Contains(t, wire, "X-Et-Failing-Step", "the step's own delivery is in its wire")
	assert.Contains(t, wire, "daemon→package")
	assert.Contains(t, wire, "package→daemon")
	assert.NotContains(t, serr.Evidence, "X-Et-Earlier-Step", "an earlier step's wire is not this step's evidence")

	log, rerr := os.ReadFile(filepath.Join(serr.Dir, "state", "logs", "extensions", "notes.wire.jsonl"))
	require.NoError(t, rerr)
	assert.Contains(t, string(log), "X-Et-Earlier-Step", "the log holds every step; the evidence only the failing one's")
	assert.Contains(t, string(log), `"method":"secret.resolve"`, "the first delivery resolved its secret over the wire")
	assert.Contains(t, string(log), `"result":"[redacted]"`)
	assert.NotContains(t, string(log), notesSecret, "a resolved secret never reaches the wire log")

	agentLog, rerr := os.ReadFile(filepath.Join(serr.Dir, "state", "logs", "extensions", et.Agent+".wire.jsonl"))
	require.NoError(t, rerr)
	assert.Contains(t, string(agentLog), `"method":"executor.run"`)
	assert.Contains(t, string(agentLog), `"token":"[redacted]"`)
	assert.NotContains(t, string(agentLog), "otb1.", "a run's toolbelt token never reaches the wire log")
}

// section is the body of the evidence section whose heading starts with
// heading, up to the next one.
func section(t *testing.T, evidence, heading string) string {
	t.Helper()
	i := strings.Index(evidence, heading)
	require.GreaterOrEqual(t, i, 0, "no section %q in:\n%s", heading, evidence)
	rest := evidence[i+len(heading):]
	if j := strings.Index(rest, "\n--- "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}
