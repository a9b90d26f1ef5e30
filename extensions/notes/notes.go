package notes

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// The manifests of the three releases. Release 3 is the directory's
// open-conduit-extension.json.
var (
	//go:embed releases/release1.json
	release1 []byte
	//go:embed releases/release2.json
	release2 []byte
	//go:embed open-conduit-extension.json
	release3 []byte
)

// Name is the extension's name.
const Name = "notes"

// The names the manifest declares.
const (
	FamilyNote      = "notes.note"
	FamilyPublished = "notes.published"
	WorkKind        = "notes-review"
	OpAdd           = "notes.add"
	OpAwait         = "notes.await"
	OpPublish       = "notes.publish"
	Recurrence      = "notes-digest"
	TaskDigestArm   = "notes-digest-arm"
	CheckStores     = "notes"
)

// The KV namespaces. Releases 1 and 2 (KV layout 0) keep one record per
// added note in NamespaceLegacy under the note's ID; release 3 (layout 2)
// keeps it in NamespaceIndex under "note/<id>", with the count of notes
// under "count". NamespacePublished holds the record each publication
// commits with its Event.
const (
	NamespaceLegacy    = "notes"
	NamespaceIndex     = "notes.index"
	NamespacePublished = "notes.published"
)

// Release returns release n (1, 2 or 3) of the extension: a fresh value
// with its own state, ready for sdk.Serve or sdk.Attach. Release n writes
// notes.note.v<n> payloads and reads every older version through its
// upcasters; release 3 also migrates the KV layout from version 0 to 2.
// It returns nil for any other n.
func Release(n int) *sdk.Extension {
	manifests := map[int][]byte{1: release1, 2: release2, 3: release3}
	manifest, ok := manifests[n]
	if !ok {
		return nil
	}
	x := &extension{codec: codec{version: n}, layout: 0, secrets: sdk.SecretCache{Name: SecretKey}}
	if n == 3 {
		x.layout = 2
	}
	ext := &sdk.Extension{
		Manifest:   slices.Clone(manifest),
		Initialize: x.initialize,
		Configure:  x.configure,
		Upcasters:  map[string]sdk.Upcaster{},
		Routes:     map[string]sdk.Route{Name: {Match: x.match, Samples: x.samples}},
		Ingress:    map[string]sdk.Ingress{Name: {Push: x.push, Reconcile: x.reconcile}},
		Operations: map[string]sdk.Operation{
			OpAdd:     {Handler: x.add},
			OpAwait:   {Wait: x.await},
			OpPublish: {Emit: x.publish, Commit: x.commitPublished},
		},
		Recurrences: map[string]sdk.PureFunc[protocol.RecurrenceNextParams, protocol.RecurrenceNextResult]{Recurrence: nextDigest},
		Tasks:       map[string]sdk.Func[protocol.TaskRunParams, protocol.TaskRunResult]{TaskDigestArm: x.armDigests},
		Checks:      map[string]sdk.Func[protocol.CheckRunParams, protocol.CheckRunResult]{CheckStores: x.checkStores},
		Validate:    validate,
		Shutdown:    x.shutdown,
	}
	for v := 1; v < n; v++ {
		id := protocol.SchemaID(SchemaBase, v)
		ext.Upcasters[id] = upcasters[id]
	}
	if x.layout > 0 {
		ext.Migrate = x.migrate
	}
	if n == 3 {
		// Release 3 serves signed webhooks (its manifest declares them).
		ext.Webhook = x.webhook
	}
	return ext
}

// Extension returns the current release, 3.
func Extension() *sdk.Extension { return Release(3) }

// extension is one running release's state: what initialize and the last
// configure said.
type extension struct {
	codec  codec
	layout int // the KV layout this release writes

	mu       sync.Mutex
	stateDir string
	entries  map[string]entry // by source name
	dryRun   bool
	// secrets caches each webhook connection's secret for the generation
	// (configure resets it), so a delivery costs no secret.resolve. The
	// host answers only for a connection bound to one of notes' entries.
	secrets sdk.SecretCache

	// inbox holds the running inbox receivers (inbox.go).
	inbox inboxes
}

// entry is one configured notes entry.
type entry struct {
	ScopeID string
	ID      string
	Source  string
	Store   Store
	Digest  string // HH:MM UTC, "" for none
	// Connection is the notes-webhook connection whose secret signs the
	// entry's webhook deliveries; "" serves no webhook.
	Connection string
	// WebhookPath is where its signed deliveries arrive, "" for none.
	WebhookPath string
}

// entryConfig is a notes entry's config object.
type entryConfig struct {
	// Dir is the note store; relative to the state directory when not
	// absolute. Empty means stores/<scope>/<entry> there.
	Dir string `json:"dir,omitempty"`
	// Digest is the UTC time of day of the daily digest, HH:MM.
	Digest string `json:"digest,omitempty"`
	// InboxDir is a spool directory the entry's inbox receiver delivers
	// from (inbox.go); relative to the state directory when not absolute.
	// Empty runs no receiver.
	InboxDir string `json:"inbox_dir,omitempty"`
	// InboxPoll is how often the inbox is read, a Go duration
	// (DefaultInboxPoll when empty).
	InboxPoll string `json:"inbox_poll,omitempty"`
}

func (x *extension) initialize(ctx context.Context, p protocol.InitializeParams) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.stateDir = p.StateDir
	return nil
}

// SourceName is the ingress source a notes entry registers.
func SourceName(scopeID, entryID string) string {
	return Name + "/" + scopeID + "/" + entryID
}

func (x *extension) configure(ctx context.Context, host *sdk.Host, p protocol.ConfigureParams) (protocol.ConfigureResult, error) {
	x.mu.Lock()
	stateDir := x.stateDir
	x.mu.Unlock()
	entries := map[string]entry{}
	inboxes := map[string]inboxSpec{}
	var res protocol.ConfigureResult
	for _, ce := range p.Entries {
		if ce.Type != Name {
			continue
		}
		var cfg entryConfig
		if len(ce.Config) > 0 {
			if err := json.Unmarshal(ce.Config, &cfg); err != nil {
				return protocol.ConfigureResult{}, protocol.Errorf(protocol.CodeInvalid, "entry %s/%s: config: %v", ce.ScopeID, ce.ID, err)
			}
		}
		if cfg.Digest != "" {
			if _, _, err := parseTimeOfDay(cfg.Digest); err != nil {
				return protocol.ConfigureResult{}, protocol.Errorf(protocol.CodeInvalid, "entry %s/%s: digest: %v", ce.ScopeID, ce.ID, err)
			}
		}
		dir := cfg.Dir
		if !filepath.IsAbs(dir) && stateDir == "" {
			return protocol.ConfigureResult{}, protocol.Errorf(protocol.CodeInvalid,
				"entry %s/%s: the host named no state directory, so the store needs an absolute dir", ce.ScopeID, ce.ID)
		}
		switch {
		case dir == "":
			dir = filepath.Join(stateDir, "stores", ce.ScopeID, ce.ID)
		case !filepath.IsAbs(dir):
			dir = filepath.Join(stateDir, dir)
		}
		e := entry{ScopeID: ce.ScopeID, ID: ce.ID, Source: SourceName(ce.ScopeID, ce.ID), Store: Store{Dir: dir}, Digest: cfg.Digest}
		if webhookConnection(p.Connections, ce.Connection) {
			e.Connection, e.WebhookPath = ce.Connection, WebhookPath(ce.ScopeID, ce.ID)
			res.WebhookPaths = append(res.WebhookPaths, e.WebhookPath)
		}
		entries[e.Source] = e
		res.Sources = append(res.Sources, protocol.SourceDecl{Name: e.Source, ScopeID: e.ScopeID,
			Families: []string{FamilyNote}, Reconcile: true})
		if cfg.InboxDir != "" || cfg.InboxPoll != "" {
			spec, err := x.inboxSpec(stateDir, cfg)
			if err != nil {
				return protocol.ConfigureResult{}, protocol.Errorf(protocol.CodeInvalid, "entry %s/%s: %v", ce.ScopeID, ce.ID, err)
			}
			src := InboxSourceName(ce.ScopeID, ce.ID)
			inboxes[src] = spec
			res.Sources = append(res.Sources, protocol.SourceDecl{Name: src, ScopeID: e.ScopeID, Families: []string{FamilyNote}})
		}
	}
	slices.SortFunc(res.Sources, func(a, b protocol.SourceDecl) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(res.WebhookPaths)
	x.mu.Lock()
	x.entries, x.dryRun = entries, p.DryRun
	x.secrets.Reset()
	x.mu.Unlock()
	x.applyInboxes(host, inboxes, p.DryRun)
	return res, nil
}

// source is the entry behind a registered source.
func (x *extension) source(name string) (entry, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.entries[name]
	if !ok {
		return entry{}, protocol.Errorf(protocol.CodeNotFound, "source %q is not registered", name)
	}
	return e, nil
}

// inScope is the first entry (by ID) configured in a scope.
func (x *extension) inScope(scopeID string) (entry, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var found []entry
	for _, e := range x.entries {
		if e.ScopeID == scopeID {
			found = append(found, e)
		}
	}
	if len(found) == 0 {
		return entry{}, protocol.Errorf(protocol.CodeNotFound, "no notes entry is configured in scope %q", scopeID)
	}
	slices.SortFunc(found, func(a, b entry) int { return strings.Compare(a.ID, b.ID) })
	return found[0], nil
}

func (x *extension) snapshot() (entries []entry, dryRun bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range x.entries {
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.Source, b.Source) })
	return entries, x.dryRun
}

// ---- Ingress ----

// Delivery is the body of a webhook delivery to a notes source: the
// notes that changed, each at its new revision.
type Delivery struct {
	Notes []Record `json:"notes"`
}

// DeliveryID is the identity of a note's revision as this release sees it.
// It names the payload schema version, so a release that changes the
// payload mints new identities rather than conflicting with the Events an
// older release accepted.
func (x *extension) deliveryID(r Record) string {
	return r.ID + "@" + r.Rev + ".s" + strconv.Itoa(x.codec.version)
}

func (x *extension) draft(source string, r Record) (protocol.EventDraft, error) {
	payload, err := x.codec.encode(r.Note())
	if err != nil {
		return protocol.EventDraft{}, err
	}
	return protocol.EventDraft{Source: source, DeliveryID: x.deliveryID(r), Family: FamilyNote, Type: "note",
		Schema: x.codec.schema(), Payload: payload}, nil
}

func (x *extension) push(ctx context.Context, host *sdk.Host, p protocol.IngressPushParams) (protocol.IngressPushResult, error) {
	if _, err := x.source(p.Source); err != nil {
		return protocol.IngressPushResult{}, err
	}
	events, err := x.drafts(p.Source, p.Delivery.Body)
	if err != nil {
		return protocol.IngressPushResult{}, err
	}
	return protocol.IngressPushResult{Events: events}, nil
}

// drafts are the Events of a delivery body (Delivery) to a source.
func (x *extension) drafts(source string, body []byte) ([]protocol.EventDraft, error) {
	var d Delivery
	if err := decodeDelivery(body, &d); err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalid, "delivery body: %v", err)
	}
	var events []protocol.EventDraft
	for _, r := range d.Notes {
		if err := validID(r.ID); err != nil || r.Rev == "" {
			return nil, protocol.Errorf(protocol.CodeInvalid, "delivery: note %q needs a plain id and a rev", r.ID)
		}
		ev, err := x.draft(source, r)
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	return events, nil
}

// defaultPage is the page size when the host names none.
const defaultPage = 100

func (x *extension) reconcile(ctx context.Context, host *sdk.Host, p protocol.IngressReconcileParams) (protocol.IngressReconcileResult, error) {
	e, err := x.source(p.Source)
	if err != nil {
		return protocol.IngressReconcileResult{}, err
	}
	limit := p.MaxItems
	if limit <= 0 {
		limit = defaultPage
	}
	page, more, err := e.Store.Page(p.Cursor, limit)
	if err != nil {
		return protocol.IngressReconcileResult{}, fmt.Errorf("reading note store %s: %w", e.Store.Dir, err)
	}
	var res protocol.IngressReconcileResult
	size := 0
	for i, r := range page {
		ev, err := x.draft(p.Source, r)
		if err != nil {
			return protocol.IngressReconcileResult{}, err
		}
		size += len(ev.Payload) + len(ev.DeliveryID) + len(r.ID) + len(r.Rev)
		if p.MaxBytes > 0 && size > p.MaxBytes && i > 0 {
			// The rest goes on the next page.
			more = true
			break
		}
		res.Observations = append(res.Observations, protocol.Observation{Item: r.ID, Version: r.Rev, Event: ev})
	}
	if more {
		res.Next = res.Observations[len(res.Observations)-1].Item
	} else {
		res.Complete = true
	}
	return res, nil
}

// ---- Routing ----

// routeConfig is a notes route's handler config.
type routeConfig struct {
	// Tag, when set, matches only notes with this tag.
	Tag string `json:"tag,omitempty"`
}

// CorrelationKey is the key that ties a note's Events to one Work.
func CorrelationKey(noteID string) string { return "notes:" + noteID }

// match decides from the Event alone, with no side effect: route traces
// ask about Events that never happen.
func (x *extension) match(ctx context.Context, p protocol.RouteMatchParams) (protocol.RouteMatchResult, error) {
	if p.Event.Family != FamilyNote && p.Event.Family != FamilyPublished {
		return protocol.RouteMatchResult{Reason: "not a note"}, nil
	}
	if p.Event.Schema != x.codec.schema() {
		return protocol.RouteMatchResult{Reason: fmt.Sprintf("the event carries no %s payload", x.codec.schema())}, nil
	}
	var cfg routeConfig
	if len(p.Config) > 0 {
		if err := json.Unmarshal(p.Config, &cfg); err != nil {
			return protocol.RouteMatchResult{}, protocol.Errorf(protocol.CodeInvalid, "route config: %v", err)
		}
	}
	n, err := x.codec.decode(p.Event.Payload)
	if err != nil {
		return protocol.RouteMatchResult{Reason: "unreadable note: " + err.Error()}, nil
	}
	if cfg.Tag != "" && !slices.Contains(n.Tags, cfg.Tag) {
		return protocol.RouteMatchResult{Reason: fmt.Sprintf("note %s is not tagged %q", n.ID, cfg.Tag)}, nil
	}
	return protocol.RouteMatchResult{Match: true, Kind: WorkKind, CorrelationKeys: []string{CorrelationKey(n.ID)},
		Display: display(n), Reason: fmt.Sprintf("note %s", n.ID)}, nil
}

// samples offers one hypothetical note, dated by the host's clock.
func (x *extension) samples(ctx context.Context, p protocol.RouteSamplesParams) (protocol.RouteSamplesResult, error) {
	n := Note{ID: "sample", Title: "A sample note", Body: "written " + p.Now.UTC().Format("2006-01-02 15:04 UTC"),
		Tags: []string{"sample"}, Link: "https://notes.example/sample"}
	payload, err := x.codec.encode(n)
	if err != nil {
		return protocol.RouteSamplesResult{}, err
	}
	return protocol.RouteSamplesResult{Samples: []protocol.RouteSample{{ID: "new-note", Title: "A new note arrives",
		Event: protocol.EventDraft{Source: Name, DeliveryID: "sample@1", Family: FamilyNote, Type: "note",
			Schema: x.codec.schema(), Payload: payload, OccurredAt: p.Now}}}}, nil
}

// ---- Operations ----

// AddInput is notes.add's input.
type AddInput struct {
	Title string   `json:"title"`
	Body  string   `json:"body,omitempty"`
	Tags  []string `json:"tags,omitempty"`
}

// AddOutput is notes.add's output.
type AddOutput struct {
	Note string `json:"note"`
}

// indexRecord is what the KV keeps for a note an agent added.
type indexRecord struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	ScopeID string `json:"scope_id"`
}

// noteID names the note an intent creates: derived from the intent, so a
// retry finds the note the first attempt made; random for a call without
// a request ID, which nothing can tell from a new call.
func noteID(intentKey string) string {
	if intentKey != "" {
		sum := sha256.Sum256([]byte(intentKey))
		return "n-" + hex.EncodeToString(sum[:8])
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "n-" + hex.EncodeToString(b[:])
}

// add creates a note in the store of the caller's scope, once per request
// ID: sdk.Once records the intent, the note's ID derives from it, and the
// store is looked at before writing, so neither a replayed call nor a
// retry after a crash between the write and the host's commit makes a
// second note.
func (x *extension) add(ctx context.Context, host *sdk.Host, call protocol.OperationCallParams) (protocol.OperationCallResult, error) {
	var in AddInput
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return protocol.OperationCallResult{}, protocol.Errorf(protocol.CodeInvalid, "input: %v", err)
	}
	if strings.TrimSpace(in.Title) == "" {
		return protocol.OperationCallResult{}, protocol.Errorf(protocol.CodeInvalid, "input: a note needs a title")
	}
	e, err := x.inScope(call.Authority.ScopeID)
	if err != nil {
		return protocol.OperationCallResult{}, err
	}
	key := ""
	if call.RequestID != "" {
		key = sdk.IntentKey(call.RequestID, OpAdd)
	}
	out, err := sdk.Once(ctx, host, key, func(ctx context.Context, intent sdk.Intent) (json.RawMessage, error) {
		id := noteID(intent.Key)
		_, found, err := e.Store.Get(id)
		if err != nil {
			return nil, err
		}
		if !found {
			if err := e.Store.Put(Record{ID: id, Rev: "1", Title: in.Title, Body: in.Body, Tags: in.Tags}); err != nil {
				return nil, fmt.Errorf("writing note %s: %w", id, err)
			}
		}
		rec := indexRecord{ID: id, Title: clip(in.Title, maxTitleBytes), ScopeID: e.ScopeID}
		if _, err := host.Update(ctx, func(t *sdk.Txn) error { return x.index(t, rec) }); err != nil {
			return nil, err
		}
		return json.Marshal(AddOutput{Note: id})
	})
	return protocol.OperationCallResult{Output: out}, err
}

// index records an added note in the release's KV layout. It is
// idempotent: a note already recorded is left as it is.
func (x *extension) index(t *sdk.Txn, rec indexRecord) error {
	if x.layout == 0 {
		if _, found, err := t.Get(NamespaceLegacy, rec.ID); err != nil || found {
			return err
		}
		return t.Put(NamespaceLegacy, rec.ID, rec)
	}
	if _, found, err := t.Get(NamespaceIndex, indexKey(rec.ID)); err != nil || found {
		return err
	}
	var count noteCount
	if _, err := t.GetJSON(NamespaceIndex, countKey, &count); err != nil {
		return err
	}
	count.Notes++
	if err := t.Put(NamespaceIndex, countKey, count); err != nil {
		return err
	}
	return t.Put(NamespaceIndex, indexKey(rec.ID), rec)
}

// AwaitInput is notes.await's input.
type AwaitInput struct {
	Note string `json:"note"`
}

// await declares a Wait on a note's next change, described in words.
func (x *extension) await(ctx context.Context, host *sdk.Host, call protocol.OperationWaitParams) (protocol.OperationWaitResult, error) {
	var in AwaitInput
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return protocol.OperationWaitResult{}, protocol.Errorf(protocol.CodeInvalid, "input: %v", err)
	}
	if err := validID(in.Note); err != nil {
		return protocol.OperationWaitResult{}, protocol.Errorf(protocol.CodeInvalid, "input: %v", err)
	}
	what := "note " + in.Note
	if e, err := x.inScope(call.Authority.ScopeID); err == nil {
		if r, found, err := e.Store.Get(in.Note); err == nil && found && r.Title != "" {
			what = fmt.Sprintf("note %s (%s)", in.Note, r.Title)
		}
	}
	out, err := json.Marshal(AwaitInput{Note: in.Note})
	if err != nil {
		return protocol.OperationWaitResult{}, err
	}
	return protocol.OperationWaitResult{Wait: protocol.WaitPlan{Keys: []string{CorrelationKey(in.Note)},
		Description: clip(what+" to change", 200)}, Output: out}, nil
}

// PublishInput is notes.publish's input.
type PublishInput struct {
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
}

// publishCommit is what operation.emit hands to emit.commit.
type publishCommit struct {
	Note      string `json:"note"`
	RequestID string `json:"request_id,omitempty"`
}

// PublishedRecord is the record a publication commits with its Event, in
// the same transaction, under the note's ID in NamespacePublished.
type PublishedRecord struct {
	Note      string `json:"note"`
	Event     string `json:"event"`
	Sequence  int64  `json:"sequence"`
	Root      string `json:"root"`
	Depth     int    `json:"depth"`
	RequestID string `json:"request_id,omitempty"`
}

// publish plans an Event carrying a note. Its identity derives from the
// request ID (or, without one, from the input), so a retry is the same
// Event.
func (x *extension) publish(ctx context.Context, host *sdk.Host, call protocol.OperationEmitParams) (protocol.OperationEmitResult, error) {
	var in PublishInput
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return protocol.OperationEmitResult{}, protocol.Errorf(protocol.CodeInvalid, "input: %v", err)
	}
	if strings.TrimSpace(in.Title) == "" {
		return protocol.OperationEmitResult{}, protocol.Errorf(protocol.CodeInvalid, "input: a note needs a title")
	}
	seed := "request:" + call.RequestID
	if call.RequestID == "" {
		seed = "input:" + string(call.Input)
	}
	sum := sha256.Sum256([]byte(seed))
	id := "p-" + hex.EncodeToString(sum[:8])
	payload, err := x.codec.encode(Note{ID: id, Title: in.Title, Body: in.Body})
	if err != nil {
		return protocol.OperationEmitResult{}, err
	}
	commit, err := json.Marshal(publishCommit{Note: id, RequestID: call.RequestID})
	if err != nil {
		return protocol.OperationEmitResult{}, err
	}
	out, err := json.Marshal(AddOutput{Note: id})
	if err != nil {
		return protocol.OperationEmitResult{}, err
	}
	ev := protocol.EventDraft{Source: Name, DeliveryID: "publish/" + id, ScopeID: call.Authority.ScopeID,
		Family: FamilyPublished, Type: "published", Schema: x.codec.schema(), Payload: payload}
	if call.Authority.WorkID != "" {
		ev.Works = []string{call.Authority.WorkID}
	}
	return protocol.OperationEmitResult{Event: ev, Commit: commit, Output: out}, nil
}

// commitPublished runs inside the emission's transaction: pure, from its
// params alone, naming the accepted Event.
func (x *extension) commitPublished(ctx context.Context, p protocol.EmitCommitParams) (protocol.EmitCommitResult, error) {
	var c publishCommit
	if err := json.Unmarshal(p.Commit, &c); err != nil || c.Note == "" {
		return protocol.EmitCommitResult{}, protocol.Errorf(protocol.CodeInvalid, "commit: not a notes publication")
	}
	rec, err := json.Marshal(PublishedRecord{Note: c.Note, Event: p.Event.ID, Sequence: p.Event.Sequence,
		Root: p.Event.Root, Depth: p.Event.Depth, RequestID: c.RequestID})
	if err != nil {
		return protocol.EmitCommitResult{}, err
	}
	return protocol.EmitCommitResult{Puts: []protocol.KVPut{{Namespace: NamespacePublished, Key: c.Note, Value: rec}}}, nil
}
