package notes

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// The names of the signed webhook.
const (
	// ConnectionWebhook is the connection type whose secret signs an
	// entry's webhook deliveries. An entry that names one serves signed
	// deliveries at WebhookPath; one that names none serves no webhook.
	ConnectionWebhook = "notes-webhook"
	// SecretKey is the connection's secret key (its secret_refs key,
	// such as {"secret": "env:NOTES_WEBHOOK_SECRET"}).
	SecretKey = "secret"
	// SignatureHeader carries sdk.SignHMACSHA256 of the body under the
	// connection's secret: "sha256=<hex>".
	SignatureHeader = "X-Notes-Signature"
)

// WebhookPath is where an entry's signed deliveries arrive.
func WebhookPath(scopeID, entryID string) string { return "/" + Name + "/" + scopeID + "/" + entryID }

// webhookConnection reports whether name is a notes-webhook connection of
// those configure sent.
func webhookConnection(conns []protocol.Connection, name string) bool {
	for _, c := range conns {
		if name != "" && c.Name == name && c.Type == ConnectionWebhook {
			return true
		}
	}
	return false
}

// byWebhookPath is the entry whose webhook path is p.
func (x *extension) byWebhookPath(p string) (entry, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range x.entries {
		if e.WebhookPath != "" && e.WebhookPath == p {
			return e, true
		}
	}
	return entry{}, false
}

// webhook serves a signed delivery: a POST of a Delivery body to an
// entry's WebhookPath, signed in SignatureHeader with the entry's
// connection secret. A request that is not one is refused (unauthorized
// for the signature, invalid for the rest) and yields nothing.
func (x *extension) webhook(ctx context.Context, host *sdk.Host, p protocol.WebhookHandleParams) (protocol.WebhookHandleResult, error) {
	e, ok := x.byWebhookPath(p.WebhookPath)
	if !ok || p.Path != p.WebhookPath {
		return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeNotFound, "no notes entry serves this path")
	}
	if p.Method != http.MethodPost {
		return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeInvalid, "a delivery is a POST")
	}
	secret, err := x.secrets.Get(ctx, host, e.ScopeID, e.Connection)
	if err != nil {
		return protocol.WebhookHandleResult{}, err
	}
	if !sdk.VerifyHMACSHA256(secret, p.Body, header(p.Headers, SignatureHeader)) {
		return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeUnauthorized,
			"%s is not the body's HMAC-SHA256 under the entry's secret", SignatureHeader)
	}
	events, err := x.drafts(e.Source, p.Body)
	if err != nil {
		return protocol.WebhookHandleResult{}, err
	}
	if header(p.Headers, TestHoldHeader) != "" {
		if err := testHold(ctx); err != nil {
			return protocol.WebhookHandleResult{}, err
		}
	}
	return protocol.WebhookHandleResult{Events: events}, nil
}

// header is a request header's first value; the host sends them
// canonically keyed.
func header(h map[string][]string, name string) string {
	if vs := h[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// The test hold: a fault test needs notes stopped in the middle of a
// verified request, and a barrier rather than a sleep to know it is. When
// the daemon grants notes TestHoldEnv (settings.pass_env), naming a FIFO,
// a signed request that also carries TestHoldHeader writes "held <pid>\n"
// to the FIFO (the open blocks until the test reads it) and then holds
// until the host cancels it or the process is killed. Without the
// variable the header is ignored, so a sender cannot hold a production
// notes.
const (
	TestHoldEnv    = "NOTES_TEST_HOLD_FIFO"
	TestHoldHeader = "X-Notes-Test-Hold"
)

func testHold(ctx context.Context) error {
	fifo := os.Getenv(TestHoldEnv)
	if fifo == "" {
		return nil
	}
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("test hold: %w", err)
	}
	_, err = fmt.Fprintf(f, "held %d\n", os.Getpid())
	f.Close()
	if err != nil {
		return fmt.Errorf("test hold: %w", err)
	}
	<-ctx.Done()
	return ctx.Err()
}
