package schedule

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

//go:embed open-conduit-extension.json
var manifest []byte

// Name is the extension's name, its extension type and its route handler.
const Name = "schedule"

// The names the manifest declares.
const (
	// FamilyTriggered is the family of the Event a job's webhook yields.
	FamilyTriggered = "schedule.triggered"
	// TriggerSchemaBase is its payload schema, TriggerPayload.
	TriggerSchemaBase = "schedule.trigger"
	// WorkKindJob is the kind of a job's standing Work.
	WorkKindJob = "schedule-job"
	// Recurrence computes a job timer's next occurrence; the host fires
	// a job's timer as an Event of this family.
	Recurrence = "schedule-cron"
	// TaskArm arms, re-arms and cancels the jobs' timers.
	TaskArm = "schedule-arm"
	// ConnectionWebhook is the connection type whose token opens the
	// jobs' webhooks of the entries that name one.
	ConnectionWebhook = "schedule-webhook"
	// SecretToken is the connection's secret key.
	SecretToken = "token"
	// NamespaceTimers keeps the key of every timer the extension armed,
	// so a job whose scope left the configuration is still cancelled.
	NamespaceTimers = "schedule.timers"
)

// TimerSource is the source of the Events the host fires timers as.
const TimerSource = "core.timer"

// TriggerSchema is the current payload schema of FamilyTriggered.
var TriggerSchema = protocol.SchemaID(TriggerSchemaBase, 1)

// Extension returns a fresh schedule extension, ready for sdk.Serve or
// sdk.Attach.
func Extension() *sdk.Extension {
	x := &extension{tokens: sdk.SecretCache{Name: SecretToken, Resolve: resolveRetried}}
	return &sdk.Extension{
		Manifest:    slices.Clone(manifest),
		Configure:   x.configure,
		Webhook:     x.webhook,
		Ingress:     map[string]sdk.Ingress{Name: {}}, // its sources deliver through webhook.handle only
		Routes:      map[string]sdk.Route{Name: {Match: match, Samples: samples}},
		Triggers:    map[string]sdk.PureFunc[protocol.WorkKindTriggerParams, protocol.WorkKindTriggerResult]{WorkKindJob: trigger},
		Recurrences: map[string]sdk.PureFunc[protocol.RecurrenceNextParams, protocol.RecurrenceNextResult]{Recurrence: next},
		Tasks:       map[string]sdk.Func[protocol.TaskRunParams, protocol.TaskRunResult]{TaskArm: x.arm},
		Validate:    validate,
	}
}

// extension is what the last configure said.
type extension struct {
	mu      sync.Mutex
	entries []entry // enabled and disabled, by scope then ID
	dryRun  bool
	// tokens caches each webhook connection's token for the generation
	// (configure resets it), so a trigger costs no secret.resolve; a
	// resolution the host refuses as reentrant_call is retried. The host
	// answers only for a connection bound to one of schedule's entries.
	tokens sdk.SecretCache
}

// entry is one configured schedule entry.
type entry struct {
	ScopeID string
	ID      string
	Entry   Entry
	// Disabled is an entry of a disabled scope: its timers stay armed,
	// it registers no source and serves no webhook.
	Disabled bool
	// Source is the ingress source its webhook's Events come from.
	Source string
	// Connection is the schedule-webhook connection whose token opens
	// its webhook, "" for none; WebhookPath is where it is served.
	Connection  string
	WebhookPath string
}

// SourceName is the ingress source of an entry's webhook triggers.
func SourceName(scopeID, entryID string) string { return Name + "/" + scopeID + "/" + entryID }

// WebhookPath is the path an entry's webhook is registered at; a job is
// triggered at WebhookPath + "/<job>/<token>".
func WebhookPath(scopeID, entryID string) string { return "/" + Name + "/" + scopeID + "/" + entryID }

// CorrelationKey ties every run of one job to the job's standing Work.
func CorrelationKey(entryID, job string) string { return Name + ":" + entryID + "/" + job }

func (x *extension) configure(ctx context.Context, host *sdk.Host, p protocol.ConfigureParams) (protocol.ConfigureResult, error) {
	var (
		entries []entry
		res     protocol.ConfigureResult
	)
	add := func(ce protocol.ConfigEntry, disabled bool) error {
		if ce.Type != Name {
			return nil
		}
		parsed, err := ParseEntry(ce.Config)
		if err != nil {
			return protocol.Errorf(protocol.CodeInvalid, "entry %s/%s: config: %v", ce.ScopeID, ce.ID, err)
		}
		e := entry{ScopeID: ce.ScopeID, ID: ce.ID, Entry: parsed, Disabled: disabled}
		if !disabled {
			e.Source = SourceName(ce.ScopeID, ce.ID)
			res.Sources = append(res.Sources, protocol.SourceDecl{Name: e.Source, ScopeID: e.ScopeID, Families: []string{FamilyTriggered}})
			if webhookConnection(p.Connections, ce.Connection) {
				e.Connection, e.WebhookPath = ce.Connection, WebhookPath(ce.ScopeID, ce.ID)
				res.WebhookPaths = append(res.WebhookPaths, e.WebhookPath)
			}
		}
		entries = append(entries, e)
		return nil
	}
	for _, ce := range p.Entries {
		if err := add(ce, false); err != nil {
			return protocol.ConfigureResult{}, err
		}
	}
	for _, ce := range p.Disabled {
		if err := add(ce, true); err != nil {
			return protocol.ConfigureResult{}, err
		}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		return strings.Compare(a.ScopeID+"\x00"+a.ID, b.ScopeID+"\x00"+b.ID)
	})
	slices.SortFunc(res.Sources, func(a, b protocol.SourceDecl) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(res.WebhookPaths)
	x.mu.Lock()
	x.entries, x.dryRun = entries, p.DryRun
	x.tokens.Reset()
	x.mu.Unlock()
	return res, nil
}

func (x *extension) snapshot() (entries []entry, dryRun bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.entries), x.dryRun
}

// ---- Routing ----

// JobRef names one job of one entry, as its timer and its triggers
// carry it.
type JobRef struct {
	ScopeID string `json:"scope_id"`
	Entry   string `json:"entry"`
	Job     string `json:"job"`
}

// TimerPayload is what a job's timer carries: the job and its schedule,
// so recurrence.next computes the next occurrence from the timer alone.
type TimerPayload struct {
	JobRef
	Schedule string `json:"schedule"`
	Timezone string `json:"timezone"`
}

// TriggerPayload is the payload of a FamilyTriggered Event (TriggerSchema).
type TriggerPayload struct {
	JobRef
	// Key is the request's Idempotency-Key, if it sent one.
	Key string `json:"key,omitempty"`
}

// How a job's input came.
const (
	byTimer   = "fired on schedule"
	byTrigger = "triggered on demand"
)

// jobOf reads which job an Event is an input of: a firing of a job's
// timer, or a trigger from its webhook. Anything else, or a payload that
// does not name a job of the Event's own scope, is no job's.
func jobOf(ev protocol.Event) (ref JobRef, how string, ok bool) {
	switch {
	case ev.Source == TimerSource && ev.Family == Recurrence:
		var tp TimerPayload
		if json.Unmarshal(ev.Payload, &tp) != nil {
			return JobRef{}, "", false
		}
		ref, how = tp.JobRef, byTimer
	case ev.Family == FamilyTriggered && ev.Schema == TriggerSchema:
		var tp TriggerPayload
		if json.Unmarshal(ev.Payload, &tp) != nil || ev.Source != SourceName(ev.ScopeID, tp.Entry) {
			return JobRef{}, "", false
		}
		ref, how = tp.JobRef, byTrigger
	default:
		return JobRef{}, "", false
	}
	if ref.ScopeID != ev.ScopeID || ref.Entry == "" || len(ref.Entry) > protocol.MaxIdentifierBytes || !validJobName(ref.Job) {
		return JobRef{}, "", false
	}
	return ref, how, true
}

// routeConfig is a schedule route's handler config.
type routeConfig struct {
	// Entry, when set, takes only the jobs of this entry.
	Entry string `json:"entry,omitempty"`
	// Jobs, when set, takes only the jobs of these names.
	Jobs []string `json:"jobs,omitempty"`
}

func parseRouteConfig(raw json.RawMessage) (routeConfig, error) {
	var cfg routeConfig
	if len(raw) == 0 {
		return cfg, nil
	}
	if err := protocol.DecodeStrict(raw, &cfg); err != nil {
		return routeConfig{}, decodeError(err)
	}
	if len(cfg.Entry) > protocol.MaxIdentifierBytes {
		return routeConfig{}, &FieldError{Path: "entry", Problem: fmt.Sprintf("is %d bytes, over %d", len(cfg.Entry), protocol.MaxIdentifierBytes)}
	}
	for i, j := range cfg.Jobs {
		if err := checkJobName(j); err != nil {
			return routeConfig{}, &FieldError{Path: fmt.Sprintf("jobs[%d]", i), Problem: err.Error()}
		}
	}
	return cfg, nil
}

// match decides from the Event alone: a job's firing or trigger goes to
// the job's standing Work (one per entry and job in the scope), titled
// with the job's name.
func match(ctx context.Context, p protocol.RouteMatchParams) (protocol.RouteMatchResult, error) {
	cfg, err := parseRouteConfig(p.Config)
	if err != nil {
		return protocol.RouteMatchResult{}, protocol.Errorf(protocol.CodeInvalid, "route config: %v", err)
	}
	ref, how, ok := jobOf(p.Event)
	if !ok {
		return protocol.RouteMatchResult{Reason: "not a schedule job's firing or trigger"}, nil
	}
	if cfg.Entry != "" && cfg.Entry != ref.Entry {
		return protocol.RouteMatchResult{Reason: fmt.Sprintf("job %s/%s is not of entry %s", ref.Entry, ref.Job, cfg.Entry)}, nil
	}
	if len(cfg.Jobs) > 0 && !slices.Contains(cfg.Jobs, ref.Job) {
		return protocol.RouteMatchResult{Reason: fmt.Sprintf("job %s/%s is not one the route takes", ref.Entry, ref.Job)}, nil
	}
	return protocol.RouteMatchResult{Match: true, Kind: WorkKindJob, CorrelationKeys: []string{CorrelationKey(ref.Entry, ref.Job)},
		Display: &protocol.Display{Title: ref.Job}, Reason: fmt.Sprintf("job %s/%s %s", ref.Entry, ref.Job, how)}, nil
}

// samples offers, for a route trace, a trigger of the first job the
// route takes (or of a job named "example" of an entry "example"), dated
// by the host's clock. A timer's firing is the host's Event, not one a
// sample may stand for.
func samples(ctx context.Context, p protocol.RouteSamplesParams) (protocol.RouteSamplesResult, error) {
	cfg, err := parseRouteConfig(p.Config)
	if err != nil {
		return protocol.RouteSamplesResult{}, protocol.Errorf(protocol.CodeInvalid, "route config: %v", err)
	}
	ref := JobRef{ScopeID: p.ScopeID, Entry: "example", Job: "example"}
	if cfg.Entry != "" {
		ref.Entry = cfg.Entry
	}
	if len(cfg.Jobs) > 0 {
		ref.Job = cfg.Jobs[0]
	}
	payload, err := json.Marshal(TriggerPayload{JobRef: ref})
	if err != nil {
		return protocol.RouteSamplesResult{}, err
	}
	return protocol.RouteSamplesResult{Samples: []protocol.RouteSample{{ID: "job-triggered",
		Title: fmt.Sprintf("Job %s/%s is triggered through its webhook", ref.Entry, ref.Job),
		Event: protocol.EventDraft{Source: SourceName(p.ScopeID, ref.Entry), DeliveryID: ref.Job + "/sample", ScopeID: p.ScopeID,
			Family: FamilyTriggered, Type: "triggered", Schema: TriggerSchema, Payload: payload, OccurredAt: p.Now}}}}, nil
}

// trigger picks the input a job's run starts from, inside the start
// transaction: the newest on-demand trigger, else the newest firing. A
// backlog of firings (a daemon that was down, a clock moved far) is one
// run, for the latest occurrence; a run someone asked for says so.
func trigger(ctx context.Context, p protocol.WorkKindTriggerParams) (protocol.WorkKindTriggerResult, error) {
	var fired, asked string
	for _, ev := range p.Inputs {
		switch _, how, ok := jobOf(ev); {
		case !ok:
		case how == byTrigger:
			asked = ev.ID
		default:
			fired = ev.ID
		}
	}
	switch {
	case asked != "":
		return protocol.WorkKindTriggerResult{Trigger: asked}, nil
	case fired != "":
		return protocol.WorkKindTriggerResult{Trigger: fired}, nil
	case len(p.Inputs) > 0:
		return protocol.WorkKindTriggerResult{Trigger: p.Inputs[0].ID}, nil
	}
	return protocol.WorkKindTriggerResult{}, protocol.Errorf(protocol.CodeInvalid, "a start needs an input")
}
