package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// WebhookPaths are the webhook paths the extension registered in its last
// successful configure (each checked to be under /<name>), sorted.
func (s *Service) WebhookPaths() []string {
	out := slices.Clone(s.generation().webhooks)
	slices.Sort(out)
	return slices.Compact(out)
}

// CoveringWebhookPath is the longest of WebhookPaths that covers p (p
// itself, or a path p lies beneath), or "" when none does. The listener
// asks it once per request, so it reads the generation's paths in place
// rather than copying and sorting them as WebhookPaths does.
func (s *Service) CoveringWebhookPath(p string) string {
	best := ""
	for _, wp := range s.generation().webhooks {
		// p == wp or strings.HasPrefix(p, wp+"/"), without building wp+"/".
		covers := strings.HasPrefix(p, wp) && (len(p) == len(wp) || p[len(wp)] == '/')
		if covers && len(wp) > len(best) {
			best = wp
		}
	}
	return best
}

// ErrWebhookAnswer wraps a webhook.handle answer the host refused: an
// Event of a source the extension did not register, of a family not the
// source's, outside the source's scope or with a payload it may not
// write. The request was verified, but nothing of it is accepted; it is
// the package's fault, not the sender's.
var ErrWebhookAnswer = errors.New("the package's webhook answer was refused")

// Webhook hands one request under a registered webhook path to the
// extension's webhook.handle and returns the envelopes of the Events it
// yields, each checked as an ingress source's own answers are (Ingress):
// it names a source the extension registered, one of that source's
// families, the source's scope and a payload schema the extension writes.
// One bad Event refuses the whole answer (ErrWebhookAnswer). An error of
// the call itself is returned as it came (the package's *protocol.Error,
// a cancellation, a lost connection), so the caller can tell a refusal
// from a failure.
func (r *Remote) Webhook(ctx context.Context, p protocol.WebhookHandleParams) ([]runtime.Envelope, error) {
	svc := r.conn.Service()
	if svc == nil {
		return nil, protocol.NewError(protocol.CodeUnsupported, "the package has no host service")
	}
	var res protocol.WebhookHandleResult
	if err := r.conn.Call(ctx, "webhook.handle", p, &res); err != nil {
		return nil, err
	}
	g := svc.generation()
	out := make([]runtime.Envelope, 0, len(res.Events))
	for i, d := range res.Events {
		src, ok := g.sources[d.Source]
		switch {
		case d.DeliveryID == "":
			// Without an identity a retried delivery would be accepted twice.
			return nil, fmt.Errorf("%w: event %d has no delivery_id", ErrWebhookAnswer, i)
		case !ok:
			return nil, fmt.Errorf("%w: event %d names source %q, which the package did not register", ErrWebhookAnswer, i, d.Source)
		}
		env, err := remoteIngress{r: r, src: src}.envelope(ctx, i, d)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrWebhookAnswer, err)
		}
		out = append(out, env)
	}
	return out, nil
}
