package daemon

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

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/runtime"
)

const webhookSecret = "s3cret"

// webhookConfig configures notes' inbox in scope team with its webhook
// signed by connection hook, whose secret is env:NOTES_WEBHOOK_SECRET, and
// grants notes the test hold's variable.
const webhookConfig = `{
  "connections": [{"name": "hook", "type": "notes-webhook", "secret_refs": {"secret": "env:NOTES_WEBHOOK_SECRET"}}],
  "scopes": [{"id": "team", "connections": ["hook"], "entries": [{"id": "inbox", "type": "notes", "connection": "hook"}]}],
  "settings": {"pass_env": {"notes": ["NOTES_TEST_HOLD_FIFO", "EXTENSION_CPUPROFILE"]}}
}`

// webhookDaemon is a daemon running notes under webhookConfig, with the
// listener on, and the FIFO of notes' test hold.
type webhookDaemon struct {
	d    *Daemon
	url  string // the inbox's webhook URL
	fifo string
}

func openWebhookDaemon(t testing.TB) *webhookDaemon {
	t.Helper()
	bin := openConduitBinary(t) // built first: a build on a busy machine is no part of the start's minute
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfgDir := t.TempDir()
	state, err := os.MkdirTemp("", "oc") // a unix socket path stays short
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(state) })
	m, err := os.ReadFile("../../extensions/notes/open-conduit-extension.json") // installNotes takes a *testing.T
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(cfgDir, "extensions", "notes"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, "extensions", "notes", "open-conduit-extension.json"), m, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, ConfigFile), []byte(webhookConfig), 0o600))
	fifo := filepath.Join(t.TempDir(), "hold")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	d, err := Open(ctx, Options{ConfigDir: cfgDir, StateDir: state, Executable: bin,
		Environ: func() []string {
			return append(os.Environ(), "NOTES_WEBHOOK_SECRET="+webhookSecret, "NOTES_TEST_HOLD_FIFO="+fifo)
		}})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close(context.Background()) })
	require.Equal(t, int64(1), d.Generation().Number, "the configuration applied")
	addr := d.Paths().Webhook
	require.NotEmpty(t, addr, "status reports the listener")
	return &webhookDaemon{d: d, url: "http://" + addr + "/notes/team/inbox", fifo: fifo}
}

// post sends body to url signed with secret, with extra headers.
func post(t *testing.T, ctx context.Context, url, secret, body string, headers ...string) (int, webhookAnswer) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Notes-Signature", sdk.SignHMACSHA256([]byte(secret), []byte(body)))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, webhookAnswer{}
	}
	defer resp.Body.Close()
	var a webhookAnswer
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
	return resp.StatusCode, a
}

// held waits at the FIFO barrier until notes holds a request, and returns
// the pid notes reports.
func (w *webhookDaemon) held(t *testing.T) int {
	t.Helper()
	f, err := os.Open(w.fifo) // blocks until notes opens it to write
	require.NoError(t, err)
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	require.NoError(t, err)
	var pid int
	_, err = fmt.Sscanf(line, "held %d", &pid)
	require.NoError(t, err)
	return pid
}

func (w *webhookDaemon) events(t *testing.T) []runtime.Event {
	t.Helper()
	var evs []runtime.Event
	require.NoError(t, w.d.Store().View(t.Context(), func(r runtime.ReadTx) error {
		var err error
		evs, err = r.ScopeEvents("team", 0, 100)
		return err
	}))
	return evs
}

const signedDelivery = `{"notes":[{"id":"n1","rev":"1","title":"Hello"},{"id":"n2","rev":"1","title":"World"}]}`

// A signed delivery is answered 200 once its Events are stored; sent
// again it is the same Events; a refusal, a path no package registered,
// an oversized body and a non-POST are answered 4xx and accept nothing.
func TestWebhookListener(t *testing.T) {
	w := openWebhookDaemon(t)
	ctx := t.Context()

	status, a := post(t, ctx, w.url, webhookSecret, signedDelivery)
	require.Equal(t, http.StatusOK, status, "%+v", a)
	assert.Equal(t, 2, a.Accepted)
	stored := w.events(t)
	require.Len(t, stored, 2, "durable before the answer")
	assert.Equal(t, []string{stored[0].ID, stored[1].ID}, a.Events)

	status, again := post(t, ctx, w.url, webhookSecret, signedDelivery)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, a.Events, again.Events, "a redelivery is the same Events")
	assert.Len(t, w.events(t), 2)

	for _, c := range []struct {
		name, url, secret, body string
		status                  int
		code                    string
	}{
		{"a bad signature", w.url, "guess", `{"notes":[{"id":"n3","rev":"1"}]}`, http.StatusUnauthorized, "unauthorized"},
		{"a signed body that is no signedDelivery", w.url, webhookSecret, `[]`, http.StatusBadRequest, "invalid"},
		{"a path no package registered", strings.Replace(w.url, "/inbox", "/other", 1), webhookSecret, signedDelivery, http.StatusNotFound, "not_found"},
		{"a path under no webhook path", strings.Replace(w.url, "/notes/team/inbox", "/elsewhere", 1), webhookSecret, signedDelivery, http.StatusNotFound, "not_found"},
		{"an unclean path", w.url + "/../inbox", webhookSecret, signedDelivery, http.StatusNotFound, "not_found"},
		{"a body over the bound", w.url, webhookSecret, `{"notes":[],"pad":"` + strings.Repeat("x", MaxWebhookBody) + `"}`, http.StatusRequestEntityTooLarge, "too_large"},
	} {
		status, a := post(t, ctx, c.url, c.secret, c.body)
		assert.Equal(t, c.status, status, c.name)
		require.NotNil(t, a.Error, c.name)
		assert.Equal(t, c.code, a.Error.Code, c.name)
	}
	status, a = post(t, ctx, w.url, "guess", signedDelivery)
	require.Equal(t, http.StatusUnauthorized, status)
	assert.Contains(t, a.Error.Message, "X-Notes-Signature is not the body's HMAC-SHA256", "the package's reason")

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "a GET")

	assert.Len(t, w.events(t), 2, "no refused request accepted anything")
}

// One request beyond WebhookConcurrency is answered 503 at once; a request
// the package holds past WebhookTimeout is answered 504 and accepts
// nothing.
func TestWebhookConcurrencyAndDeadline(t *testing.T) {
	defer func(n int, d time.Duration) { WebhookConcurrency, WebhookTimeout = n, d }(WebhookConcurrency, WebhookTimeout)
	WebhookConcurrency, WebhookTimeout = 1, 2*time.Second
	w := openWebhookDaemon(t)
	ctx := t.Context()

	first := make(chan int, 1)
	go func() {
		status, _ := post(t, ctx, w.url, webhookSecret, signedDelivery, "X-Notes-Test-Hold", "1")
		first <- status
	}()
	w.held(t)
	status, a := post(t, ctx, w.url, webhookSecret, signedDelivery)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	require.NotNil(t, a.Error)
	assert.Equal(t, "overloaded", a.Error.Code)

	assert.Equal(t, http.StatusGatewayTimeout, <-first, "held past the deadline")
	assert.Empty(t, w.events(t))
	status, _ = post(t, ctx, w.url, webhookSecret, signedDelivery)
	assert.Equal(t, http.StatusOK, status, "the slot is free again")
}

// The package killed while it handles a request: the sender gets 5xx and
// nothing is accepted; the retried signedDelivery, once notes is back, is
// accepted exactly once.
func TestWebhookPackageKilledMidRequest(t *testing.T) {
	w := openWebhookDaemon(t)
	ctx := t.Context()
	first := make(chan int, 1)
	go func() {
		status, _ := post(t, ctx, w.url, webhookSecret, signedDelivery, "X-Notes-Test-Hold", "1")
		first <- status
	}()
	proc, _, _ := w.d.Package("notes")
	gen := proc.Generation()
	pid := w.held(t)
	require.NoError(t, syscall.Kill(-pid, syscall.SIGKILL))
	status := <-first
	assert.GreaterOrEqual(t, status, 500, "a crash is 5xx")
	assert.Empty(t, w.events(t), "nothing accepted")

	// Back: a new start of notes is running (woken by its state changes).
	for {
		changed := proc.Ready()
		if st, _, _ := proc.Status(); st == host.Running && proc.Generation() > gen {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("notes did not come back")
		}
	}
	status, a := post(t, ctx, w.url, webhookSecret, signedDelivery)
	require.Equal(t, http.StatusOK, status, "%+v", a)
	status, _ = post(t, ctx, w.url, webhookSecret, signedDelivery)
	require.Equal(t, http.StatusOK, status)
	assert.Len(t, w.events(t), 2, "accepted exactly once")
}

// The paths served are those of the generation in force: an entry that no
// longer names a webhook connection stops being served at the apply, and
// serves again when it does, without a restart.
func TestWebhookPathsFollowTheGeneration(t *testing.T) {
	w := openWebhookDaemon(t)
	ctx := t.Context()
	proc, _, _ := w.d.Package("notes")
	pid := proc.PID()
	without := strings.Replace(webhookConfig, `, "connection": "hook"}]`, `}]`, 1)
	require.NotEqual(t, webhookConfig, without)

	_, ds, err := w.d.ApplyConfig(ctx, []byte(without))
	require.NoError(t, err)
	require.Empty(t, ds)
	status, _ := post(t, ctx, w.url, webhookSecret, signedDelivery)
	assert.Equal(t, http.StatusNotFound, status, "no longer registered")

	_, ds, err = w.d.ApplyConfig(ctx, []byte(webhookConfig))
	require.NoError(t, err)
	require.Empty(t, ds)
	status, _ = post(t, ctx, w.url, webhookSecret, signedDelivery)
	assert.Equal(t, http.StatusOK, status, "registered again")
	assert.Equal(t, pid, proc.PID(), "without a restart")
}
