package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/internal/daemontest"
)

// startFaultServe is startWebhookServe's daemon with args added to serve.
func startFaultServe(t *testing.T, args ...string) *webhookServe {
	t.Helper()
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Packages: []string{notesDir},
		Config: []byte(signedNotesConfig), Env: []string{"NOTES_WEBHOOK_SECRET=" + hookSecret}, Args: args})
	st, err := d.Client.Status(t.Context())
	require.NoError(t, err)
	return &webhookServe{d: d, url: "http://" + st.Paths.Webhook + notes.WebhookPath("team", "inbox")}
}

// A rule injected through the client takes effect on the next message it
// matches, over the real binary: the proxy passes the first delivery
// untouched (the control), the armed crash kills notes at the next
// webhook.handle so that delivery is refused with nothing accepted, and
// the redelivery to the restarted package is accepted once.
func TestServeTestFaultsCrashAtTheNextMatchingMessage(t *testing.T) {
	w := startFaultServe(t, "--test-faults")
	assert.Contains(t, w.d.Stdout(), "faults:   test fault injection")
	ctx := t.Context()
	status, answer := w.send(t, hookSecret, twoNotes)
	require.Equal(t, http.StatusOK, status, "%v: behind a proxy with no rule, the delivery is untouched", answer)

	const rule = "crash method=webhook.handle kind=request nth=1"
	require.NoError(t, w.d.Client.InjectFault(ctx, "notes", rule))
	st, err := w.d.Client.Faults(ctx, "notes")
	require.NoError(t, err)
	require.Equal(t, []client.FaultRule{{Rule: rule}}, st.Rules, "armed, nothing counted yet")

	const third = `{"notes":[{"id":"n3","rev":"1","title":"Crash"}]}`
	status, answer = w.send(t, hookSecret, third)
	assert.GreaterOrEqual(t, status, 500, "%v: the package died under the delivery", answer)
	assert.Len(t, w.events(t), 2, "nothing of the crashed delivery was accepted")
	st, err = w.d.Client.Faults(ctx, "notes")
	require.NoError(t, err)
	assert.Equal(t, []client.FaultRule{{Rule: rule, Counted: 1, Fired: 1}}, st.Rules)

	status, answer = w.send(t, hookSecret, third)
	require.Equal(t, http.StatusOK, status, "%v: the restarted package takes the redelivery", answer)
	assert.Equal(t, []string{"n1@1.s3", "n2@1.s3", "n3@1.s3"}, deliveryIDs(w.events(t)), "accepted once")
	sts, err := w.d.Client.Status(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, sts.Packages)
	assert.Equal(t, 1, sts.Packages[0].Restarts, "the crash was a real SIGKILL the supervisor saw")
	assert.Contains(t, w.d.Stderr(), `test fault: fault \"`+rule+`\" fired on a to-ext request webhook.handle`)

	require.NoError(t, w.d.Client.ClearFaults(ctx, "notes"))
	st, err = w.d.Client.Faults(ctx, "notes")
	require.NoError(t, err)
	assert.Empty(t, st.Rules)
}

// The fault API refuses with stable codes: a daemon without --test-faults
// (conflict), a rule that does not parse (invalid_request, naming the
// word), a package that is not admitted (not_found).
func TestServeTestFaultsRefusals(t *testing.T) {
	ctx := t.Context()
	off := startFaultServe(t)
	err := off.d.Client.InjectFault(ctx, "notes", "crash nth=1")
	require.ErrorIs(t, err, client.ErrConflict)
	assert.Contains(t, err.Error(), "--test-faults")
	require.ErrorIs(t, off.d.Client.ClearFaults(ctx, "notes"), client.ErrConflict)
	status, answer := off.send(t, hookSecret, twoNotes)
	assert.Equal(t, http.StatusOK, status, "%v", answer)

	on := startFaultServe(t, "--test-faults")
	err = on.d.Client.InjectFault(ctx, "notes", "explode nth=1")
	require.ErrorIs(t, err, client.ErrInvalidRequest)
	assert.Contains(t, err.Error(), `unknown fault "explode"`)
	require.ErrorIs(t, on.d.Client.InjectFault(ctx, "nobody", "crash"), client.ErrNotFound)
	require.ErrorIs(t, on.d.Client.ClearFaults(ctx, "nobody"), client.ErrNotFound)
	st, err := on.d.Client.Faults(ctx, "notes")
	require.NoError(t, err)
	assert.Empty(t, st.Rules, "a refused rule is not armed")
}
