package daemon

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// wireLogWebhookConfig runs notes' inbox signed by connection note-hook
// and schedule's job tick opened by connection tick-hook's token, each
// secret from the environment.
const wireLogWebhookConfig = `{
  "connections": [
    {"name": "note-hook", "type": "notes-webhook", "secret_refs": {"secret": "env:WIRELOG_NOTES_SECRET"}},
    {"name": "tick-hook", "type": "schedule-webhook", "secret_refs": {"token": "env:WIRELOG_SCHEDULE_TOKEN"}}
  ],
  "scopes": [{"id": "team", "connections": ["note-hook", "tick-hook"],
    "entries": [
      {"id": "inbox", "type": "notes", "connection": "note-hook"},
      {"id": "jobs", "type": "schedule", "connection": "tick-hook",
       "config": {"jobs": [{"name": "tick", "schedule": "0 */5 * * * *"}]}}
    ],
    "routes": [{"id": "jobs", "handler": "schedule", "kind": "schedule-job", "binding": "job"}],
    "bindings": [{"name": "job", "executor": "runner", "executor_config": {"command": "true"}}]
  }]
}`

// TestWireLogKeepsNoWebhookCredential: a notes delivery signed with the
// connection's secret, with an Authorization header and a query, and a
// schedule trigger whose token is its last path segment, go through the
// daemon with the wire log on; the log holds neither the secret, the
// signature, the Authorization, the query's value nor the token, but
// keeps the method, the registered paths and the header names.
func TestWireLogKeepsNoWebhookCredential(t *testing.T) {
	bin := openConduitBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfgDir := t.TempDir()
	state, err := os.MkdirTemp("", "oc")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(state) })
	for _, name := range []string{"notes", "schedule", "runner"} {
		m, err := os.ReadFile(filepath.Join("..", "..", "extensions", name, "open-conduit-extension.json"))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(cfgDir, "extensions", name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(cfgDir, "extensions", name, "open-conduit-extension.json"), m, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, ConfigFile), []byte(wireLogWebhookConfig), 0o600))
	const (
		notesSecret   = "wl-notes-secret-4411"
		scheduleToken = "wl-schedule-token-7723"
		authorization = "Bearer wl-authorization-9932"
		queryValue    = "wl-query-value-5150"
	)
	wire := NewWireLog(filepath.Join(LogDir(state), "extensions"))
	d, err := Open(ctx, Options{ConfigDir: cfgDir, StateDir: state, Executable: bin, Wire: wire.Tap,
		Environ: func() []string {
			return append(os.Environ(), "WIRELOG_NOTES_SECRET="+notesSecret, "WIRELOG_SCHEDULE_TOKEN="+scheduleToken)
		}})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close(context.Background()); wire.Close() })
	require.Equal(t, int64(1), d.Generation().Number, "the configuration applied")
	base := "http://" + d.Paths().Webhook

	status, a := post(t, ctx, base+"/notes/team/inbox?sig="+queryValue, notesSecret, signedDelivery, "Authorization", authorization)
	require.Equal(t, http.StatusOK, status, "%+v", a)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/schedule/team/jobs/tick/"+scheduleToken, nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "the trigger with the token is accepted")

	require.NoError(t, d.Close(context.Background()))
	require.NoError(t, wire.Close())
	signature := sdk.SignHMACSHA256([]byte(notesSecret), []byte(signedDelivery))
	if _, hex, ok := strings.Cut(signature, "="); ok {
		signature = hex // the digest alone, whatever it is spelled with
	}
	for pkg, wantPath := range map[string]string{"notes": `"/notes/team/inbox"`, "schedule": `"/schedule/team/jobs"`} {
		data, err := os.ReadFile(WireLogPath(state, pkg))
		require.NoError(t, err, pkg)
		log := string(data)
		require.Contains(t, log, `"webhook.handle"`, "%s's log has the delivery's request", pkg)
		assert.Contains(t, log, wantPath, "%s's log keeps the registered path", pkg)
		for what, value := range map[string]string{"the notes secret": notesSecret, "the notes signature": signature,
			"the schedule token": scheduleToken, "the Authorization": "wl-authorization-9932", "the query value": queryValue} {
			assert.False(t, strings.Contains(log, value), "%s's wire log holds %s", pkg, what)
		}
		if pkg == "notes" {
			assert.Contains(t, log, `"X-Notes-Signature":["[redacted]"]`, "the header's name is kept, its value is not")
			assert.Contains(t, log, `"Authorization":["[redacted]"]`)
		}
	}
	for _, pkg := range []string{"notes", "schedule"} {
		assert.False(t, strings.Contains(strings.ToLower(string(mustRead(t, WireLogPath(state, pkg)))), "env:wirelog"), "%s's wire log holds secret reference text", pkg)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
