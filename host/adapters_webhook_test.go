package host_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

const webhookManifest = `{"name": "wh", "version": "1.0.0", "command": ["wh"], "protocol": [1],
  "provides": {"extensions": [{"type": "wh", "ingress": true, "webhooks": true,
      "families": [{"name": "wh.ping", "rederivable": true}, {"name": "wh.other", "rederivable": true}]}],
    "schemas": [{"base": "wh.ping", "versions": [1]}]}}`

// webhookExtension registers source wh/in (scope s1, family wh.ping) at
// /wh/in and answers each request by its body: the body names the case.
func webhookExtension() *sdk.Extension {
	good := protocol.EventDraft{Source: "wh/in", DeliveryID: "d-1", Family: "wh.ping", Type: "ping", Schema: "wh.ping.v1", Payload: json.RawMessage(`{}`)}
	answers := map[string]func() (protocol.WebhookHandleResult, error){
		"good": func() (protocol.WebhookHandleResult, error) {
			return protocol.WebhookHandleResult{Events: []protocol.EventDraft{good}}, nil
		},
		"refuse": func() (protocol.WebhookHandleResult, error) {
			return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeUnauthorized, "bad signature")
		},
	}
	bad := map[string]func(d *protocol.EventDraft){
		"foreign-source": func(d *protocol.EventDraft) { d.Source = "wh/other" },
		"foreign-family": func(d *protocol.EventDraft) { d.Family = "wh.other" },
		"foreign-scope":  func(d *protocol.EventDraft) { d.ScopeID = "s2" },
		"no-identity":    func(d *protocol.EventDraft) { d.DeliveryID = "" },
		"unwritable":     func(d *protocol.EventDraft) { d.Schema = "wh.ping.v2" },
	}
	for name, spoil := range bad {
		answers[name] = func() (protocol.WebhookHandleResult, error) {
			d := good
			spoil(&d)
			// A good Event first: one bad Event refuses the whole answer.
			return protocol.WebhookHandleResult{Events: []protocol.EventDraft{good, d}}, nil
		}
	}
	return &sdk.Extension{
		Manifest: []byte(webhookManifest),
		Configure: func(ctx context.Context, h *sdk.Host, p protocol.ConfigureParams) (protocol.ConfigureResult, error) {
			return protocol.ConfigureResult{WebhookPaths: []string{"/wh/in"},
				Sources: []protocol.SourceDecl{{Name: "wh/in", ScopeID: "s1", Families: []string{"wh.ping"}}}}, nil
		},
		Ingress: map[string]sdk.Ingress{"wh": {}},
		Webhook: func(ctx context.Context, h *sdk.Host, p protocol.WebhookHandleParams) (protocol.WebhookHandleResult, error) {
			return answers[string(p.Body)]()
		},
	}
}

// webhookConfigure configures wh in s1, the scope of its source.
var webhookConfigure = protocol.ConfigureParams{Entries: []protocol.ConfigEntry{{ScopeID: "s1", ID: "e1", Type: "wh"}}}

func TestRemoteWebhook(t *testing.T) {
	fx := newFixture(t)
	m, err := protocol.ParseManifest([]byte(webhookManifest))
	require.NoError(t, err)
	svc := host.NewService(host.ServiceConfig{Manifest: m, Store: fx.store})
	ext, err := sdk.Attach(webhookExtension(), svc)
	require.NoError(t, err)
	att, err := host.Attach(ctxT(t), ext, svc, t.TempDir(), webhookConfigure)
	require.NoError(t, err)
	assert.Equal(t, []string{"/wh/in"}, svc.WebhookPaths())
	r := host.NewRemote(att)
	call := func(body string) error {
		_, err := r.Webhook(ctxT(t), protocol.WebhookHandleParams{Method: "POST", Path: "/wh/in", WebhookPath: "/wh/in", Body: []byte(body)})
		return err
	}

	envs, err := r.Webhook(ctxT(t), protocol.WebhookHandleParams{Method: "POST", Path: "/wh/in", WebhookPath: "/wh/in", Body: []byte("good")})
	require.NoError(t, err)
	require.Len(t, envs, 1)
	assert.Equal(t, "wh/in", envs[0].Source)
	assert.Equal(t, "s1", envs[0].ScopeID, "the source's scope")
	assert.Equal(t, "d-1", envs[0].DeliveryID)

	err = call("refuse")
	var pe *protocol.Error
	require.ErrorAs(t, err, &pe, "the package's refusal comes back as it was sent")
	assert.Equal(t, protocol.CodeUnauthorized, pe.Code)
	assert.NotErrorIs(t, err, host.ErrWebhookAnswer)

	for _, name := range []string{"foreign-source", "foreign-family", "foreign-scope", "no-identity", "unwritable"} {
		assert.ErrorIs(t, call(name), host.ErrWebhookAnswer, name)
	}
}

// TestCoveringWebhookPath: the listener's per-request lookup picks what
// the longest covering path of WebhookPaths is: a path covers itself and
// the paths beneath it, never a path that merely shares its prefix.
func TestCoveringWebhookPath(t *testing.T) {
	fx := newFixture(t)
	m, err := protocol.ParseManifest([]byte(webhookManifest))
	require.NoError(t, err)
	svc := host.NewService(host.ServiceConfig{Manifest: m, Store: fx.store})
	registered := []string{"/wh/in", "/wh/in/deep", "/wh/inner"}
	x := webhookExtension()
	x.Configure = func(ctx context.Context, h *sdk.Host, p protocol.ConfigureParams) (protocol.ConfigureResult, error) {
		return protocol.ConfigureResult{WebhookPaths: registered,
			Sources: []protocol.SourceDecl{{Name: "wh/in", ScopeID: "s1", Families: []string{"wh.ping"}}}}, nil
	}
	ext, err := sdk.Attach(x, svc)
	require.NoError(t, err)
	_, err = host.Attach(ctxT(t), ext, svc, t.TempDir(), webhookConfigure)
	require.NoError(t, err)
	require.ElementsMatch(t, registered, svc.WebhookPaths())

	// reference is the longest covering path as the listener found it
	// before, from WebhookPaths.
	reference := func(p string) string {
		best := ""
		for _, wp := range svc.WebhookPaths() {
			if (p == wp || strings.HasPrefix(p, wp+"/")) && len(wp) > len(best) {
				best = wp
			}
		}
		return best
	}
	for p, want := range map[string]string{
		"/wh/in": "/wh/in", "/wh/in/x": "/wh/in", "/wh/in/deep": "/wh/in/deep", "/wh/in/deep/y": "/wh/in/deep",
		"/wh/in/deeper": "/wh/in", "/wh/inner": "/wh/inner", "/wh/inner/z": "/wh/inner", "/wh/inx": "",
		"/wh/i": "", "/wh": "", "/": "", "": "", "/wh/in/": "/wh/in",
	} {
		assert.Equal(t, want, svc.CoveringWebhookPath(p), "path %q", p)
		assert.Equal(t, reference(p), svc.CoveringWebhookPath(p), "path %q", p)
	}
}
