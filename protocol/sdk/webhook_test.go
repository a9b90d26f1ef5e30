package sdk_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// hookManifest declares one ingress type with webhooks.
const hookManifest = `{"name": "hook", "version": "1.0.0", "command": ["hook"], "protocol": [1],
  "provides": {"extensions": [{"type": "hook", "ingress": true, "webhooks": true, "families": [{"name": "hook.ping", "rederivable": true}]}],
    "schemas": [{"base": "hook.ping", "versions": [1]}]}}`

// hookExtension verifies the X-Hook-Signature header with secret and
// yields one Event per request.
func hookExtension(secret string, seen *[]protocol.WebhookHandleParams) *sdk.Extension {
	return &sdk.Extension{
		Manifest: []byte(hookManifest),
		Configure: func(ctx context.Context, h *sdk.Host, p protocol.ConfigureParams) (protocol.ConfigureResult, error) {
			return protocol.ConfigureResult{WebhookPaths: []string{"/hook/in"},
				Sources: []protocol.SourceDecl{{Name: "hook/in", Families: []string{"hook.ping"}}}}, nil
		},
		Ingress: map[string]sdk.Ingress{"hook": {}},
		Webhook: func(ctx context.Context, h *sdk.Host, p protocol.WebhookHandleParams) (protocol.WebhookHandleResult, error) {
			*seen = append(*seen, p)
			if !sdk.VerifyHMACSHA256([]byte(secret), p.Body, first(p.Headers["X-Hook-Signature"])) {
				return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeUnauthorized, "bad signature")
			}
			return protocol.WebhookHandleResult{Events: []protocol.EventDraft{{Source: "hook/in", DeliveryID: string(p.Body),
				Family: "hook.ping", Type: "ping", Schema: "hook.ping.v1", Payload: []byte(`{}`)}}}, nil
		},
	}
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// webhook.handle reaches Extension.Webhook with the request as sent, both
// ways, and a refusal crosses with its code and message.
func TestWebhookHandle(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			var seen []protocol.WebhookHandleParams
			c, _ := m.start(t, hookExtension("s3cret", &seen), sdktest.New())
			require.NoError(t, c.Call(ctx, "initialize", initParams, nil))
			var conf protocol.ConfigureResult
			require.NoError(t, c.Call(ctx, "configure", protocol.ConfigureParams{}, &conf))
			require.Equal(t, []string{"/hook/in"}, conf.WebhookPaths)

			body := []byte("d-1")
			req := protocol.WebhookHandleParams{Method: "POST", Path: "/hook/in/x", WebhookPath: "/hook/in", Query: "q=1",
				Headers: map[string][]string{"X-Hook-Signature": {sdk.SignHMACSHA256([]byte("s3cret"), body)}}, Body: body}
			var res protocol.WebhookHandleResult
			require.NoError(t, c.Call(ctx, "webhook.handle", req, &res))
			require.Len(t, res.Events, 1)
			assert.Equal(t, "d-1", res.Events[0].DeliveryID)
			require.Len(t, seen, 1)
			assert.Equal(t, req, seen[0])

			req.Headers["X-Hook-Signature"] = []string{sdk.SignHMACSHA256([]byte("other"), body)}
			err := c.Call(ctx, "webhook.handle", req, &res)
			assert.ErrorIs(t, err, protocol.ErrUnauthorized)
			assert.ErrorContains(t, err, "bad signature")
		})
	}
}

// A manifest with webhooks needs the handler, and a handler needs the
// declaration.
func TestWebhookHandlerMatchesTheManifest(t *testing.T) {
	var seen []protocol.WebhookHandleParams
	ext := hookExtension("s", &seen)
	ext.Webhook = nil
	_, err := sdk.Attach(ext, sdktest.New())
	assert.ErrorContains(t, err, "the manifest declares webhooks (an extension type with webhooks) but its handler is nil")

	ext = hookExtension("s", &seen)
	ext.Manifest = []byte(strings.Replace(hookManifest, `"webhooks": true, `, "", 1))
	require.NotEqual(t, hookManifest, string(ext.Manifest))
	_, err = sdk.Attach(ext, sdktest.New())
	assert.ErrorContains(t, err, "webhooks (an extension type with webhooks) has a handler but the manifest does not declare it")
}

func TestVerifyHMACSHA256(t *testing.T) {
	secret, body := []byte("s3cret"), []byte(`{"notes":[]}`)
	good := sdk.SignHMACSHA256(secret, body)
	require.True(t, strings.HasPrefix(good, "sha256="))
	for _, c := range []struct {
		name         string
		secret, body []byte
		header       string
		want         bool
	}{
		{"the signature", secret, body, good, true},
		{"upper-case hex", secret, body, "sha256=" + strings.ToUpper(good[7:]), true},
		{"another secret", []byte("other"), body, good, false},
		{"another body", secret, []byte(`{"notes":[1]}`), good, false},
		{"no prefix", secret, body, good[7:], false},
		{"another algorithm", secret, body, "sha1=" + good[7:], false},
		{"short", secret, body, good[:len(good)-2], false},
		{"not hex", secret, body, good[:len(good)-1] + "z", false},
		{"empty", secret, body, "", false},
		{"empty secret", nil, body, sdk.SignHMACSHA256(nil, body), false},
	} {
		assert.Equal(t, c.want, sdk.VerifyHMACSHA256(c.secret, c.body, c.header), c.name)
	}
}

// FuzzVerifyHMACSHA256: a header from a sender never panics the check,
// and only the body's own signature verifies.
func FuzzVerifyHMACSHA256(f *testing.F) {
	f.Add([]byte("k"), []byte("body"), "sha256=")
	f.Add([]byte("k"), []byte("body"), sdk.SignHMACSHA256([]byte("k"), []byte("body")))
	f.Add([]byte("k"), []byte(""), "sha256=zz")
	f.Fuzz(func(t *testing.T, secret, body []byte, header string) {
		ok := sdk.VerifyHMACSHA256(secret, body, header)
		if ok && !strings.EqualFold(header, sdk.SignHMACSHA256(secret, body)) {
			t.Fatalf("verified a header that is not the body's signature: %q", header)
		}
		if len(secret) > 0 && !sdk.VerifyHMACSHA256(secret, body, sdk.SignHMACSHA256(secret, body)) {
			t.Fatal("the body's own signature did not verify")
		}
	})
}
