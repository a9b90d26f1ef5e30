package notes_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

const testSecret = "s3cret"

// startSigned is release 3 configured with two entries in scope "team":
// inbox, signed by connection "hook", and plain, which names none.
func startSigned(t *testing.T, m mode) (sdk.Caller, *sdktest.Host, protocol.ConfigureResult) {
	t.Helper()
	h := sdktest.New()
	h.SetSecrets("hook", map[string]string{notes.SecretKey: testSecret})
	c := m.start(t, 3, h)
	ctx := testContext(t)
	require.NoError(t, c.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1},
		Host: protocol.HostInfo{Name: "open-conduit", Version: "test"}, StateDir: t.TempDir()}, nil))
	var res protocol.ConfigureResult
	require.NoError(t, c.Call(ctx, "configure", protocol.ConfigureParams{
		Entries: []protocol.ConfigEntry{
			{ScopeID: "team", ID: "inbox", Type: notes.Name, Connection: "hook"},
			{ScopeID: "team", ID: "plain", Type: notes.Name},
		},
		Connections: []protocol.Connection{{Name: "hook", Type: notes.ConnectionWebhook, SecretNames: []string{notes.SecretKey}}},
		KV:          protocol.KVLayout{Stored: 2, Declared: 2},
	}, &res))
	return c, h, res
}

func signedRequest(body string, secret string) protocol.WebhookHandleParams {
	p := notes.WebhookPath("team", "inbox")
	return protocol.WebhookHandleParams{Method: "POST", Path: p, WebhookPath: p, Body: []byte(body),
		Headers: map[string][]string{notes.SignatureHeader: {sdk.SignHMACSHA256([]byte(secret), []byte(body))}}}
}

const oneNote = `{"notes":[{"id":"n1","rev":"1","title":"Hello"}]}`

// A signed delivery yields its notes' Events; the secret is resolved
// once for the generation; every other request is refused with a reason
// and yields nothing.
func TestWebhookSignedDelivery(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			c, h, conf := startSigned(t, m)
			assert.Equal(t, []string{"/notes/team/inbox"}, conf.WebhookPaths, "only the entry with a connection serves a webhook")

			var res protocol.WebhookHandleResult
			require.NoError(t, c.Call(ctx, "webhook.handle", signedRequest(oneNote, testSecret), &res))
			require.Len(t, res.Events, 1)
			assert.Equal(t, notes.SourceName("team", "inbox"), res.Events[0].Source)
			assert.Equal(t, "n1@1.s3", res.Events[0].DeliveryID)
			var none protocol.WebhookHandleResult
			require.NoError(t, c.Call(ctx, "webhook.handle", signedRequest(`{"notes":[]}`, testSecret), &none))
			assert.Empty(t, none.Events)

			resolves := 0
			for _, call := range h.Calls() {
				if call == "secret.resolve" {
					resolves++
				}
			}
			assert.Equal(t, 1, resolves, "the secret is resolved once per generation")

			wrongMethod := signedRequest(oneNote, testSecret)
			wrongMethod.Method = "GET"
			otherPath := signedRequest(oneNote, testSecret)
			otherPath.Path = otherPath.WebhookPath + "/more"
			unsigned := signedRequest(oneNote, testSecret)
			delete(unsigned.Headers, notes.SignatureHeader)
			for _, c2 := range []struct {
				name string
				req  protocol.WebhookHandleParams
				code error
			}{
				{"another secret", signedRequest(oneNote, "guess"), protocol.ErrUnauthorized},
				{"unsigned", unsigned, protocol.ErrUnauthorized},
				{"a body signed for another", func() protocol.WebhookHandleParams {
					r := signedRequest(oneNote, testSecret)
					r.Body = []byte(`{"notes":[{"id":"n1","rev":"2","title":"Forged"}]}`)
					return r
				}(), protocol.ErrUnauthorized},
				{"not a POST", wrongMethod, protocol.ErrInvalid},
				{"a signed body that is no delivery", signedRequest(`[1]`, testSecret), protocol.ErrInvalid},
				{"a note without a rev", signedRequest(`{"notes":[{"id":"n1"}]}`, testSecret), protocol.ErrInvalid},
				{"under the path", otherPath, protocol.ErrNotFound},
			} {
				err := c.Call(ctx, "webhook.handle", c2.req, &res)
				assert.ErrorIs(t, err, c2.code, c2.name)
			}
		})
	}
}

// A new configure drops the cached secret, so a rotated secret takes
// effect with the generation that brings it.
func TestWebhookSecretRotatesWithTheGeneration(t *testing.T) {
	ctx := testContext(t)
	c, h, _ := startSigned(t, modes[0])
	require.NoError(t, c.Call(ctx, "webhook.handle", signedRequest(oneNote, testSecret), nil))
	h.SetSecrets("hook", map[string]string{notes.SecretKey: "rotated"})
	require.NoError(t, c.Call(ctx, "webhook.handle", signedRequest(oneNote, testSecret), nil), "cached for the generation")
	require.NoError(t, c.Call(ctx, "configure", protocol.ConfigureParams{
		Entries:     []protocol.ConfigEntry{{ScopeID: "team", ID: "inbox", Type: notes.Name, Connection: "hook"}},
		Connections: []protocol.Connection{{Name: "hook", Type: notes.ConnectionWebhook, SecretNames: []string{notes.SecretKey}}},
		KV:          protocol.KVLayout{Stored: 2, Declared: 2},
	}, nil))
	assert.ErrorIs(t, c.Call(ctx, "webhook.handle", signedRequest(oneNote, testSecret), nil), protocol.ErrUnauthorized)
	require.NoError(t, c.Call(ctx, "webhook.handle", signedRequest(oneNote, "rotated"), nil))
}

func TestValidateWebhookConnection(t *testing.T) {
	ctx := testContext(t)
	c, err := sdk.Attach(notes.Extension(), sdktest.New())
	require.NoError(t, err)
	require.NoError(t, c.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}}, nil))
	check := func(config string, secrets ...string) error {
		return c.Call(ctx, "validate", protocol.ValidateParams{Kind: protocol.ValidateConnection, Type: notes.ConnectionWebhook,
			ID: "hook", Config: json.RawMessage(config), SecretNames: slices.Clone(secrets)}, nil)
	}
	assert.NoError(t, check(`{}`, notes.SecretKey))
	assert.ErrorIs(t, check(`{}`), protocol.ErrInvalid, "no secret")
	assert.ErrorIs(t, check(`{}`, notes.SecretKey, "token"), protocol.ErrInvalid, "a secret it has no use for")
	assert.ErrorIs(t, check(`{"url":"x"}`, notes.SecretKey), protocol.ErrInvalid, "config it does not take")
}
