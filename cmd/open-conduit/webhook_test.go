package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/internal/daemontest"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// signedNotesConfig serves notes' inbox in scope team with a webhook
// signed by connection hook (secret env:NOTES_WEBHOOK_SECRET), and grants
// notes the test hold's FIFO variable.
const signedNotesConfig = `{
  "connections": [{"name": "hook", "type": "notes-webhook", "secret_refs": {"secret": "env:NOTES_WEBHOOK_SECRET"}}],
  "scopes": [{"id": "team", "connections": ["hook"], "entries": [{"id": "inbox", "type": "notes", "connection": "hook"}]}],
  "settings": {"pass_env": {"notes": ["NOTES_TEST_HOLD_FIFO"]}}
}`

const hookSecret = "a shared secret"

const twoNotes = `{"notes":[{"id":"n1","rev":"1","title":"Hello"},{"id":"n2","rev":"1","title":"World"}]}`

// webhookServe is a real `open-conduit serve` with notes under
// signedNotesConfig, the inbox's webhook URL and notes' hold FIFO.
type webhookServe struct {
	d    *daemontest.Daemon
	url  string
	fifo string
}

func startWebhookServe(t *testing.T) *webhookServe {
	t.Helper()
	fifo := filepath.Join(daemontest.TempDir(t), "hold")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Packages: []string{notesDir},
		Config: []byte(signedNotesConfig), Env: []string{"NOTES_WEBHOOK_SECRET=" + hookSecret, notes.TestHoldEnv + "=" + fifo}})
	st, err := d.Client.Status(t.Context())
	require.NoError(t, err)
	require.NotEmpty(t, st.Paths.Webhook, "status reports the listener")
	assert.Contains(t, d.Stdout(), "webhooks: http://"+st.Paths.Webhook+"\n", "serve says where the listener is")
	return &webhookServe{d: d, url: "http://" + st.Paths.Webhook + notes.WebhookPath("team", "inbox"), fifo: fifo}
}

// send posts body signed with secret and returns the status and the
// listener's answer.
func (w *webhookServe) send(t *testing.T, secret, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set(notes.SignatureHeader, sdk.SignHMACSHA256([]byte(secret), []byte(body)))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var answer map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
	return resp.StatusCode, answer
}

// events are the team scope's Events as client reads them.
func (w *webhookServe) events(t *testing.T) []client.Event {
	t.Helper()
	page, err := w.d.Client.Events(t.Context(), client.EventQuery{Scope: "team"})
	require.NoError(t, err)
	return page.Events
}

func deliveryIDs(evs []client.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.DeliveryID)
	}
	return out
}

// A signed webhook is accepted once and is visible through client; sent
// again, it is the same Events.
func TestWebhookSignedDeliveryAcceptedOnce(t *testing.T) {
	w := startWebhookServe(t)
	status, answer := w.send(t, hookSecret, twoNotes)
	require.Equal(t, http.StatusOK, status, "%v", answer)
	assert.EqualValues(t, 2, answer["accepted"])
	evs := w.events(t)
	assert.Equal(t, []string{"n1@1.s3", "n2@1.s3"}, deliveryIDs(evs), "durable and visible once answered")
	assert.Equal(t, notes.SourceName("team", "inbox"), evs[0].Source)

	status, again := w.send(t, hookSecret, twoNotes)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, answer["events"], again["events"], "a redelivery is the same Events")
	assert.Len(t, w.events(t), 2, "accepted once")
}

// A bad signature is refused 4xx with notes' reason, and nothing is
// accepted.
func TestWebhookBadSignatureRefused(t *testing.T) {
	w := startWebhookServe(t)
	status, answer := w.send(t, "a guess", twoNotes)
	assert.Equal(t, http.StatusUnauthorized, status)
	refusal, _ := answer["error"].(map[string]any)
	require.NotNil(t, refusal, "%v", answer)
	assert.Equal(t, "unauthorized", refusal["code"])
	assert.Contains(t, refusal["message"], notes.SignatureHeader+" is not the body's HMAC-SHA256")
	assert.Empty(t, w.events(t), "nothing accepted")
}

// notes killed (SIGKILL to its process group) while it handles a request:
// the sender gets 5xx and nothing is accepted; the retried delivery is
// accepted exactly once.
func TestWebhookPackageKilledMidRequest(t *testing.T) {
	w := startWebhookServe(t)
	first := make(chan int, 1)
	go func() {
		status, _ := w.send(t, hookSecret, twoNotes, notes.TestHoldHeader, "1")
		first <- status
	}()
	// The barrier: notes opens the FIFO to write only once it holds the
	// verified request.
	f, err := os.Open(w.fifo)
	require.NoError(t, err)
	line, err := bufio.NewReader(f).ReadString('\n')
	f.Close()
	require.NoError(t, err)
	var pid int
	_, err = fmt.Sscanf(line, "held %d", &pid)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(-pid, syscall.SIGKILL))

	status := <-first
	assert.GreaterOrEqual(t, status, 500, "a crash mid-request is 5xx")
	assert.Less(t, status, 600)
	assert.Empty(t, w.events(t), "nothing accepted")

	// The retry waits for notes' restart inside the listener.
	status, answer := w.send(t, hookSecret, twoNotes)
	require.Equal(t, http.StatusOK, status, "%v", answer)
	status, _ = w.send(t, hookSecret, twoNotes)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, []string{"n1@1.s3", "n2@1.s3"}, deliveryIDs(w.events(t)), "accepted exactly once")
	st, err := w.d.Client.Status(t.Context())
	require.NoError(t, err)
	for _, p := range st.Packages {
		if p.Name == notes.Name {
			assert.GreaterOrEqual(t, p.Restarts, 1, "the kill was a crash the supervisor restarted")
		}
	}
}
