package schedule

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// IdempotencyHeader names a trigger: requests with the same value trigger
// the job once, so a sender may retry safely. Without it every request is
// a new trigger.
const IdempotencyHeader = "Idempotency-Key"

// MaxIdempotencyKeyBytes bounds IdempotencyHeader's value.
const MaxIdempotencyKeyBytes = 128

// webhookConnection reports whether name is a schedule-webhook connection
// of those configure sent.
func webhookConnection(conns []protocol.Connection, name string) bool {
	for _, c := range conns {
		if name != "" && c.Name == name && c.Type == ConnectionWebhook {
			return true
		}
	}
	return false
}

// byWebhookPath is the enabled entry whose webhook path is p.
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

// resolveRetried resolves a connection's secrets, retrying the host's
// reentrant_call refusals.
func resolveRetried(ctx context.Context, host *sdk.Host, p protocol.SecretResolveParams) (map[string]string, error) {
	return retryReentrant(ctx, func() (map[string]string, error) { return host.SecretResolve(ctx, p) })
}

// tokenMatches compares in constant time: both sides are hashed first, so
// not even the token's length leaks.
func tokenMatches(want []byte, got string) bool {
	if len(want) == 0 {
		return false
	}
	a, b := sha256.Sum256(want), sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// webhook triggers a job on demand: a POST to
// /schedule/<scope>/<entry>/<job>/<token>, where token is the entry's
// connection's token. The token is checked before the job is looked up,
// so a sender without it learns nothing of the entry's jobs. The request's
// body is ignored. A request that is not one is refused (unauthorized for
// the token, not_found for a path that names no job, invalid for the
// rest) and yields nothing.
func (x *extension) webhook(ctx context.Context, host *sdk.Host, p protocol.WebhookHandleParams) (protocol.WebhookHandleResult, error) {
	e, ok := x.byWebhookPath(p.WebhookPath)
	if !ok {
		return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeNotFound, "no schedule entry serves this path")
	}
	rest, ok := strings.CutPrefix(p.Path, p.WebhookPath+"/")
	job, tok, _ := strings.Cut(rest, "/")
	if !ok || job == "" || tok == "" || strings.Contains(tok, "/") {
		return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeNotFound, "a job is triggered at %s/<job>/<token>", p.WebhookPath)
	}
	if p.Method != http.MethodPost {
		return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeInvalid, "a trigger is a POST")
	}
	want, err := x.tokens.Get(ctx, host, e.ScopeID, e.Connection)
	if err != nil {
		return protocol.WebhookHandleResult{}, err
	}
	if !tokenMatches(want, tok) {
		return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeUnauthorized, "the path's token is not the entry's")
	}
	if _, ok := e.Entry.Job(job); !ok {
		return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeNotFound, "entry %s has no such job", e.ID)
	}
	key := header(p.Headers, IdempotencyHeader)
	if key != "" && !validIdempotencyKey(key) {
		return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeInvalid,
			"%s is 1 to %d letters, digits, '.', '_', ':' or '-'", IdempotencyHeader, MaxIdempotencyKeyBytes)
	}
	ref := JobRef{ScopeID: e.ScopeID, Entry: e.ID, Job: job}
	payload, err := json.Marshal(TriggerPayload{JobRef: ref, Key: key})
	if err != nil {
		return protocol.WebhookHandleResult{}, err
	}
	ev := protocol.EventDraft{Source: e.Source, DeliveryID: triggerID(job, key, p), ScopeID: e.ScopeID,
		Family: FamilyTriggered, Type: "triggered", Schema: TriggerSchema, Payload: payload}
	if key == "" {
		// A keyed trigger is the same Event however late it is sent
		// again, so it carries nothing of one request's own.
		ev.OccurredAt = p.ReceivedAt
	}
	return protocol.WebhookHandleResult{Events: []protocol.EventDraft{ev}}, nil
}

// triggerID is a trigger's identity: the job and the request's
// idempotency key, else when the host received it, else random.
func triggerID(job, key string, p protocol.WebhookHandleParams) string {
	switch {
	case key != "":
		return job + "/key:" + key
	case !p.ReceivedAt.IsZero():
		return job + "/at:" + strconv.FormatInt(p.ReceivedAt.UnixNano(), 10)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return job + "/random:" + hex.EncodeToString(b[:])
}

func validIdempotencyKey(k string) bool {
	if k == "" || len(k) > MaxIdempotencyKeyBytes {
		return false
	}
	for _, r := range k {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == ':', r == '-':
		default:
			return false
		}
	}
	return true
}

// header is a request header's first value; the host sends them
// canonically keyed.
func header(h map[string][]string, name string) string {
	if vs := h[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}
