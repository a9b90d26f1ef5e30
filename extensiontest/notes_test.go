package extensiontest_test

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extensions/notes"
	et "github.com/open-conduit/open-conduit/extensiontest"
)

const notesSecret = "s3cret-for-tests"

// notesCase is a case of the notes package with its entry's webhook
// signed under notesSecret (an env: reference the daemon resolves).
func notesCase(steps ...et.Step) et.Case {
	return et.Case{
		Package: "../extensions/notes",
		Env:     []string{"ET_NOTES_SECRET=" + notesSecret},
		Config: func(c *et.Config) {
			c.Connections = append(c.Connections, et.ConnectionConfig{Name: "hook", Type: notes.ConnectionWebhook,
				SecretRefs: map[string]string{notes.SecretKey: "env:ET_NOTES_SECRET"}})
			sc := c.Scope(et.Scope)
			sc.Connections = append(sc.Connections, "hook")
			sc.Entry(notes.Name).Connection = "hook"
		},
		Steps: steps,
	}
}

// delivery is a signed notes webhook of one note.
func delivery(id, title string) *et.Webhook {
	return &et.Webhook{Path: notes.WebhookPath(et.Scope, notes.Name),
		JSON: notes.Delivery{Notes: []notes.Record{{ID: id, Rev: "1", Title: title}}},
		Sign: et.HMACSHA256(notes.SignatureHeader, []byte(notesSecret))}
}

// TestNotes drives extensions/notes through the harness as an author
// would: a signed webhook becomes Work the scripted agent runs (calling
// notes.add, checked in the KV), an unsigned one is refused and yields
// nothing, and a killed package is restarted and serves again.
func TestNotes(t *testing.T) {
	t.Parallel()
	et.Test(t, notesCase(
		et.Step{
			Name:        "a signed delivery becomes work the agent runs",
			Description: "the agent adds a note through the toolbelt",
			Agent: []et.AgentStep{
				{Call: notes.OpAdd, Input: notes.AddInput{Title: "from the agent"}, Expect: map[string]any{}},
				{Call: notes.OpPublish, Input: map[string]any{"title": "x"}, ExpectError: "unauthorized", RequestID: "not-granted"},
			},
			Config: func(c *et.Config) {
				// Grant add only, so publish is refused as the script expects.
				c.Scope(et.Scope).Binding(et.AgentBinding).Operations = []string{notes.OpAdd}
			},
			Webhook: delivery("n1", "Hello"),
			Expect: []et.Check{
				et.ExpectEvent(et.EventMatch{Family: notes.FamilyNote, Count: 1}),
				et.ExpectWork(et.WorkMatch{Kind: notes.WorkKind, State: client.WorkDone, Title: "Hello", Count: 1}),
				et.ExpectKV(notes.NamespaceIndex, "count", map[string]any{"notes": 1}),
				et.ExpectNoOtherEvent(),
			},
		},
		et.Step{
			Name:    "an unsigned delivery is refused",
			Webhook: &et.Webhook{Path: notes.WebhookPath(et.Scope, notes.Name), JSON: notes.Delivery{Notes: []notes.Record{{ID: "n2", Rev: "1", Title: "x"}}}, Status: http.StatusUnauthorized},
			Expect:  []et.Check{et.ExpectNoEvent(et.EventMatch{})},
		},
		et.Step{
			Name:        "a killed package is restarted and serves",
			KillPackage: notes.Name,
			Webhook:     delivery("n3", "After the crash"),
			Expect: []et.Check{
				et.ExpectWork(et.WorkMatch{State: client.WorkDone, Title: "After the crash"}),
				et.ExpectDoctor(notes.Name, client.CheckOK),
			},
		},
		et.Step{
			Name:  "the agent waits for a note to change",
			Agent: []et.AgentStep{{Call: notes.OpAwait, Input: map[string]string{"note": "n9"}}},
			Config: func(c *et.Config) {
				c.Scope(et.Scope).Binding(et.AgentBinding).Operations = []string{notes.OpAdd, notes.OpAwait}
			},
			Webhook: delivery("n9", "Waited on"),
			Expect: []et.Check{
				et.ExpectWait(et.WaitMatch{Description: "note n9 to change", Count: 1}),
				et.ExpectWork(et.WorkMatch{Title: "Waited on", State: client.WorkWaiting}),
			},
		},
		et.Step{
			Name:    "the daemon restarts on its state",
			Restart: true,
			Expect:  []et.Check{et.ExpectWork(et.WorkMatch{State: client.WorkDone, Count: 2}), et.ExpectKV(notes.NamespaceIndex, "count", map[string]any{"notes": 2})},
		},
	))
}

// TestFailureNamesTheStep is the harness's negative control: a step whose
// check cannot hold fails, and its message names the step's number and
// name first, then what was expected and found, then the evidence, and
// the work directory is kept.
func TestFailureNamesTheStep(t *testing.T) {
	t.Parallel()
	c := notesCase(
		et.Step{Name: "a delivery", Webhook: delivery("n1", "Hello"),
			Expect: []et.Check{et.ExpectEvent(et.EventMatch{Family: notes.FamilyNote})}},
		et.Step{Name: "expects what never happens", Description: "no delivery is made",
			Expect: []et.Check{et.ExpectEvent(et.EventMatch{Family: notes.FamilyNote, Type: "never"})}},
	)
	c.Timeout = 2 * time.Second
	err := et.Run(t, c)
	var serr *et.StepError
	require.ErrorAs(t, err, &serr)
	t.Cleanup(func() { os.RemoveAll(serr.Dir) })
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, `step 2 "expects what never happens" failed (no delivery is made)`), msg)
	assert.Contains(t, msg, "expected: an event of this step with family=notes.note type=never")
	assert.Contains(t, msg, "found:    0 matching of the step's 0 events")
	for _, section := range []string{"--- step transcript", "--- agent transcript", "--- daemon log", "--- package notes stderr", "work directory kept: "} {
		assert.Contains(t, msg, section)
	}
	assert.DirExists(t, serr.Dir, "a failing case keeps its work directory")
}
