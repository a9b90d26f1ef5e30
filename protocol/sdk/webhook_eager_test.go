package sdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// webhook.handle starts on the reader (servedEager), and a handler that
// blocks (notes' test hold waits on its context) neither stalls the
// stream nor misses its $/cancel: the next delivery is answered meanwhile.
// The negative control takes both hand-ons away (no release on Done, the
// deadline an hour off): then the next delivery gets no answer, which it
// would get were webhook.handle handed to a goroutine at once, so the
// control also shows the handler runs on the reader.
func TestBlockingWebhookNeitherStallsNorMissesCancel(t *testing.T) {
	for _, c := range []struct {
		name     string
		noHandOn bool
		answered bool
	}{
		{"waits on ctx", false, true},
		{"negative control: no release on Done, deadline an hour off", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.noHandOn {
				t.Cleanup(sdk.SetEagerDeadline(time.Hour))
				t.Cleanup(sdk.SetReleaseOnDone(false))
			}
			host, blocked := startBlockingWebhook(t)
			wait := 5 * time.Second
			if !c.answered {
				wait = 300 * time.Millisecond // it cannot be answered: the reader is held
			}
			quickCtx, quickDone := context.WithTimeout(t.Context(), wait)
			defer quickDone()
			var res protocol.WebhookHandleResult
			err := host.Call(quickCtx, "webhook.handle", webhookRequest("quick"), &res)
			if !c.answered {
				assert.ErrorIs(t, err, context.DeadlineExceeded, "the blocked handler held the reading")
				return
			}
			require.NoError(t, err, "a delivery behind a blocking one is served")
			require.Len(t, res.Events, 1)
			assert.Equal(t, "quick", res.Events[0].DeliveryID)
			blocked.cancel()
			assert.ErrorIs(t, <-blocked.err, context.Canceled)
			select {
			case <-blocked.seen:
			case <-time.After(10 * time.Second):
				t.Fatal("the blocking webhook.handle never saw its $/cancel")
			}
		})
	}
}

func webhookRequest(body string) protocol.WebhookHandleParams {
	return protocol.WebhookHandleParams{Method: "POST", Path: "/wh/in", WebhookPath: "/wh/in", Body: []byte(body),
		ReceivedAt: time.Unix(1, 0).UTC()}
}

// startBlockingWebhook serves an extension whose webhook answers a body
// with one Event named after it, except the body "block", which waits for
// its cancellation; it starts one such delivery and returns once its
// handler runs.
func startBlockingWebhook(t *testing.T) (*jsonrpc.Conn, blockedCall) {
	started, seen := make(chan struct{}), make(chan struct{})
	ext := &sdk.Extension{
		Manifest: []byte(`{"name": "wh", "version": "1.0.0", "command": ["wh"], "protocol": [1],
  "provides": {"extensions": [{"type": "wh", "ingress": true, "webhooks": true,
      "families": [{"name": "wh.ping", "rederivable": true}]}], "schemas": [{"base": "wh.ping", "versions": [1]}]}}`),
		Ingress: map[string]sdk.Ingress{"wh": {}},
		Webhook: func(ctx context.Context, _ *sdk.Host, p protocol.WebhookHandleParams) (protocol.WebhookHandleResult, error) {
			if string(p.Body) == "block" {
				close(started)
				<-ctx.Done()
				close(seen)
				return protocol.WebhookHandleResult{}, ctx.Err()
			}
			return protocol.WebhookHandleResult{Events: []protocol.EventDraft{{Source: "wh/in", DeliveryID: string(p.Body)}}}, nil
		},
		Logf: func(string, ...any) {},
	}
	host := servedOverPipes(t, ext)
	ctx, cancel := context.WithCancel(t.Context())
	blocked := blockedCall{cancel: cancel, err: make(chan error, 1), seen: seen}
	go func() { blocked.err <- host.Call(ctx, "webhook.handle", webhookRequest("block"), nil) }()
	<-started
	return host, blocked
}
