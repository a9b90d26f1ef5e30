package sdk

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
)

// serveWebhook serves webhook.handle: a request under one of the webhook
// paths the extension registered, handed to Extension.Webhook.
func serveWebhook(s *server, ctx context.Context, p protocol.WebhookHandleParams) (protocol.WebhookHandleResult, error) {
	if s.ext.Webhook == nil {
		// checkExtension refuses a manifest with webhooks and no handler,
		// so only a host that ignores the manifest gets here.
		return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeUndeclared, "%s serves no webhooks", s.manifest.Name)
	}
	return s.ext.Webhook(ctx, s.host, p)
}

// SignaturePrefix begins a signature header VerifyHMACSHA256 reads.
const SignaturePrefix = "sha256="

// SignHMACSHA256 is the signature header value of body under secret:
// "sha256=" and the lowercase hex HMAC-SHA256, the form GitHub's
// X-Hub-Signature-256 uses.
func SignHMACSHA256(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return SignaturePrefix + hex.EncodeToString(mac.Sum(nil))
}

// VerifyHMACSHA256 reports whether header is body's signature under
// secret (SignHMACSHA256's form; hex in either case). It compares in
// constant time and refuses an empty secret, so an unconfigured secret
// never verifies anything.
func VerifyHMACSHA256(secret, body []byte, header string) bool {
	if len(secret) == 0 || !strings.HasPrefix(header, SignaturePrefix) {
		return false
	}
	got, err := hex.DecodeString(header[len(SignaturePrefix):])
	if err != nil || len(got) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}
