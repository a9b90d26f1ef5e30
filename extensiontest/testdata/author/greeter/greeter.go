// Package greeter is an extension an author keeps in their own
// repository, written on the SDK: a signed webhook of greetings, a route
// that makes each greeting (and each fired reminder) Work, an operation
// that keeps a reply in the KV and one that arms a reminder timer. Release
// 1 keeps replies under "greeter"/"reply/<name>"; release 2 (KV layout 2)
// keeps them under "greeter.replies"/"<name>" and migrates release 1's.
package greeter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// The names the manifest declares.
const (
	Name           = "greeter"
	FamilyGreeting = "greeter.greeting"
	WorkKind       = "greeter-reply"
	Reminder       = "greeter-reminder"
	OpReply        = "greeter.reply"
	OpRemind       = "greeter.remind"
	ConnectionType = "greeter-webhook"
	SecretKey      = "secret"
	// SignatureHeader carries sdk.SignHMACSHA256 of the body.
	SignatureHeader = "X-Greeter-Signature"
)

// The KV namespaces of each layout.
const (
	NamespaceV1 = "greeter"         // layout 1: "reply/<name>"
	NamespaceV2 = "greeter.replies" // layout 2: "<name>"
)

// WebhookPath is where an entry's deliveries arrive.
func WebhookPath(scope, entry string) string { return "/" + Name + "/" + scope + "/" + entry }

// Greeting is a webhook delivery's body, and the payload of its Event.
type Greeting struct {
	ID   string `json:"id"`
	From string `json:"from"`
}

// Reply is greeter.reply's input, and what the KV keeps.
type Reply struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// Remind is greeter.remind's input: a reminder to greet Name at At.
type Remind struct {
	Name string    `json:"name"`
	At   time.Time `json:"at"`
}

type entry struct {
	scope, id, connection, source string
}

type extension struct {
	layout int
	mu     sync.Mutex
	paths  map[string]entry // webhook path → entry
}

// Extension is release layout's greeter (1 or 2) with its manifest.
func Extension(manifest []byte, layout int) *sdk.Extension {
	x := &extension{layout: layout}
	ext := &sdk.Extension{
		Manifest:  manifest,
		Configure: x.configure,
		Webhook:   x.webhook,
		// Its sources deliver through the webhook only.
		Ingress: map[string]sdk.Ingress{Name: {}},
		Routes:  map[string]sdk.Route{Name: {Match: match}},
		Operations: map[string]sdk.Operation{
			OpReply:  {Handler: x.reply},
			OpRemind: {Handler: remind},
		},
		Recurrences: map[string]sdk.PureFunc[protocol.RecurrenceNextParams, protocol.RecurrenceNextResult]{
			// A reminder fires once.
			Reminder: func(context.Context, protocol.RecurrenceNextParams) (protocol.RecurrenceNextResult, error) {
				return protocol.RecurrenceNextResult{}, nil
			},
		},
	}
	if layout >= 2 {
		ext.Migrate = migrate
	}
	return ext
}

func (x *extension) configure(_ context.Context, _ *sdk.Host, p protocol.ConfigureParams) (protocol.ConfigureResult, error) {
	paths := map[string]entry{}
	var res protocol.ConfigureResult
	for _, ce := range p.Entries {
		if ce.Type != Name {
			continue
		}
		e := entry{scope: ce.ScopeID, id: ce.ID, connection: ce.Connection, source: Name + "/" + ce.ScopeID + "/" + ce.ID}
		res.Sources = append(res.Sources, protocol.SourceDecl{Name: e.source, ScopeID: e.scope, Families: []string{FamilyGreeting}})
		if e.connection != "" {
			paths[WebhookPath(e.scope, e.id)] = e
			res.WebhookPaths = append(res.WebhookPaths, WebhookPath(e.scope, e.id))
		}
	}
	x.mu.Lock()
	x.paths = paths
	x.mu.Unlock()
	return res, nil
}

func (x *extension) webhook(ctx context.Context, host *sdk.Host, p protocol.WebhookHandleParams) (protocol.WebhookHandleResult, error) {
	x.mu.Lock()
	e, ok := x.paths[p.WebhookPath]
	x.mu.Unlock()
	if !ok || p.Method != http.MethodPost {
		return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeNotFound, "no greeter entry serves this request")
	}
	secrets, err := host.SecretResolve(ctx, protocol.SecretResolveParams{Connection: e.connection, ScopeID: e.scope, Names: []string{SecretKey}})
	if err != nil {
		return protocol.WebhookHandleResult{}, err
	}
	var sig string
	if vs := p.Headers[SignatureHeader]; len(vs) > 0 {
		sig = vs[0]
	}
	if !sdk.VerifyHMACSHA256([]byte(secrets[SecretKey]), p.Body, sig) {
		return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeUnauthorized, "%s does not sign the body", SignatureHeader)
	}
	var g Greeting
	if err := json.Unmarshal(p.Body, &g); err != nil || g.ID == "" || g.From == "" {
		return protocol.WebhookHandleResult{}, protocol.Errorf(protocol.CodeInvalid, "a greeting is {\"id\": …, \"from\": …}")
	}
	payload, _ := json.Marshal(g)
	return protocol.WebhookHandleResult{Events: []protocol.EventDraft{{Source: e.source, DeliveryID: g.ID,
		Family: FamilyGreeting, Type: "received", Payload: payload}}}, nil
}

// match makes Work of every greeting and every fired reminder.
func match(_ context.Context, p protocol.RouteMatchParams) (protocol.RouteMatchResult, error) {
	switch p.Event.Family {
	case FamilyGreeting:
		var g Greeting
		if err := json.Unmarshal(p.Event.Payload, &g); err != nil {
			return protocol.RouteMatchResult{Reason: "unreadable greeting"}, nil
		}
		ctxJSON, _ := json.Marshal(map[string]string{"name": g.From})
		return protocol.RouteMatchResult{Match: true, Kind: WorkKind, CorrelationKeys: []string{"greeting:" + g.ID},
			Display: &protocol.Display{Title: "Reply to " + g.From}, Context: ctxJSON, Reason: "a greeting"}, nil
	case Reminder:
		var r Remind
		if err := json.Unmarshal(p.Event.Payload, &r); err != nil {
			return protocol.RouteMatchResult{Reason: "unreadable reminder"}, nil
		}
		return protocol.RouteMatchResult{Match: true, Kind: WorkKind, CorrelationKeys: []string{"reminder:" + r.Name},
			Display: &protocol.Display{Title: "Greet " + r.Name + " again"}, Reason: "a reminder fired"}, nil
	}
	return protocol.RouteMatchResult{Reason: "neither a greeting nor a reminder"}, nil
}

// reply keeps the reply in the KV of the release's layout, once per
// request ID (sdk.Once): a retried call replays the first answer.
func (x *extension) reply(ctx context.Context, host *sdk.Host, call protocol.OperationCallParams) (protocol.OperationCallResult, error) {
	var r Reply
	if err := json.Unmarshal(call.Input, &r); err != nil || r.Name == "" {
		return protocol.OperationCallResult{}, protocol.Errorf(protocol.CodeInvalid, "greeter.reply takes {\"name\", \"text\"}")
	}
	ns, key := NamespaceV1, "reply/"+r.Name
	if x.layout >= 2 {
		ns, key = NamespaceV2, r.Name
	}
	out, err := sdk.Once(ctx, host, onceKey(call, OpReply), func(ctx context.Context, _ sdk.Intent) (json.RawMessage, error) {
		if _, err := host.Update(ctx, func(t *sdk.Txn) error { return t.Put(ns, key, r) }); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]string{"namespace": ns, "key": key})
	})
	return protocol.OperationCallResult{Output: out}, err
}

// remind arms the reminder's timer, once per request ID.
func remind(ctx context.Context, host *sdk.Host, call protocol.OperationCallParams) (protocol.OperationCallResult, error) {
	var r Remind
	if err := json.Unmarshal(call.Input, &r); err != nil || r.Name == "" || r.At.IsZero() {
		return protocol.OperationCallResult{}, protocol.Errorf(protocol.CodeInvalid, "greeter.remind takes {\"name\", \"at\"}")
	}
	out, err := sdk.Once(ctx, host, onceKey(call, OpRemind), func(ctx context.Context, _ sdk.Intent) (json.RawMessage, error) {
		payload, _ := json.Marshal(r)
		t, err := host.TimerArm(ctx, protocol.TimerArmParams{Key: "remind/" + r.Name, Recurrence: Reminder,
			ScopeID: call.Authority.ScopeID, Due: r.At, Payload: payload})
		if err != nil {
			return nil, err
		}
		return json.Marshal(map[string]string{"timer": t.Key})
	})
	return protocol.OperationCallResult{Output: out}, err
}

// onceKey is the call's intent key; a call without a request ID runs
// every time.
func onceKey(call protocol.OperationCallParams, op string) string {
	if call.RequestID == "" {
		return ""
	}
	return sdk.IntentKey(call.RequestID, op)
}

// migrate moves layout 1's replies to layout 2, one atomic batch each:
// idempotent, so a crash mid-way is finished by the next start.
func migrate(ctx context.Context, host *sdk.Host, stored, declared int) error {
	if stored >= 2 {
		return nil
	}
	for {
		page, err := host.List(ctx, protocol.KVListParams{Namespace: NamespaceV1, Prefix: "reply/", Limit: 100})
		if err != nil {
			return err
		}
		if len(page.Items) == 0 {
			return nil
		}
		for _, item := range page.Items {
			name := item.Key[len("reply/"):]
			if _, err := host.Update(ctx, func(t *sdk.Txn) error {
				v, found, err := t.Get(NamespaceV1, item.Key)
				if err != nil || !found {
					return err
				}
				var r Reply
				if err := json.Unmarshal(v, &r); err != nil {
					return fmt.Errorf("reply %s: %w", item.Key, err)
				}
				if err := t.Put(NamespaceV2, name, r); err != nil {
					return err
				}
				t.Delete(NamespaceV1, item.Key)
				return nil
			}); err != nil {
				return err
			}
		}
	}
}
