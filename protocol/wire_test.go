package protocol_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

var (
	t0 = time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	t1 = time.Date(2026, 11, 30, 4, 5, 6, 0, time.UTC)
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

var sampleEvent = protocol.Event{
	ID: "evt_1", Sequence: 42, ScopeID: "team", Source: "notes/inbox", DeliveryID: "d-1",
	Family: "notes.note", Type: "created", Schema: "notes.note.v2", Payload: raw(`{"text":"hi"}`),
	Parent: "evt_0", Root: "evt_0", Depth: 1, Works: []string{"w1"}, OccurredAt: t0, AcceptedAt: t1,
}

var sampleEventJSON = `{"id":"evt_1","sequence":42,"scope_id":"team","source":"notes/inbox","delivery_id":"d-1",
	"family":"notes.note","type":"created","schema":"notes.note.v2","payload":{"text":"hi"},
	"parent":"evt_0","root":"evt_0","depth":1,"works":["w1"],
	"occurred_at":"2026-11-30T04:00:00Z","accepted_at":"2026-11-30T04:05:06Z"}`

var sampleWork = protocol.Work{
	ID: "w1", ScopeID: "team", Kind: "notes-review", Binding: "b", State: "waiting",
	CorrelationKeys: []string{"notes:1"}, Display: raw(`{"title":"t"}`), Context: raw(`{"k":1}`),
	Grants: []string{"notes.read"}, Revision: 3, CreatedAt: t0, UpdatedAt: t1,
}

var sampleWorkJSON = `{"id":"w1","scope_id":"team","kind":"notes-review","binding":"b","state":"waiting",
	"correlation_keys":["notes:1"],"display":{"title":"t"},"context":{"k":1},"grants":["notes.read"],
	"revision":3,"created_at":"2026-11-30T04:00:00Z","updated_at":"2026-11-30T04:05:06Z"}`

// wireCase is one Go value of a wire type and its golden JSON.
type wireCase struct {
	name   string
	value  any // a pointer to the Go value
	golden string
}

// wireCases pins the JSON of every wire type: the Go value, encoded, must
// equal the golden JSON, and the golden JSON, decoded strictly, must equal
// the Go value.
var wireCases = []wireCase{
	{"empty", &protocol.Empty{}, `{}`},
	{"initialize params", &protocol.InitializeParams{
		ProtocolVersions: []protocol.Version{1, 2},
		Host:             protocol.HostInfo{Name: "open-conduit", Version: "0.1.0"},
		StateDir:         "/s/extensions/notes",
		ExecutorDirs:     map[string]string{"notes-run": "/s/executors/notes-run"},
		ResourceDirs:     map[string]string{"notes-ws": "/s/resources/notes-ws"},
		ContainerDirs:    map[string]string{"notes-box": "/s/containers/notes-box"},
		ContainerHost:    "h1",
		ConfigDir:        "/etc/oc",
	}, `{"protocol_versions":[1,2],"host":{"name":"open-conduit","version":"0.1.0"},
		"state_dir":"/s/extensions/notes","executor_dirs":{"notes-run":"/s/executors/notes-run"},
		"resource_dirs":{"notes-ws":"/s/resources/notes-ws"},"container_dirs":{"notes-box":"/s/containers/notes-box"},
		"container_host":"h1","config_dir":"/etc/oc"}`},
	{"initialize params minimal", &protocol.InitializeParams{
		ProtocolVersions: []protocol.Version{1},
		Host:             protocol.HostInfo{Name: "open-conduit", Version: "0.1.0"},
		StateDir:         "/s",
	}, `{"protocol_versions":[1],"host":{"name":"open-conduit","version":"0.1.0"},"state_dir":"/s"}`},
	{"initialize result", &protocol.InitializeResult{
		ProtocolVersion: 1,
		Manifest:        raw(`{"name":"notes","version":"1.0.0","protocol":[1]}`),
	}, `{"protocol_version":1,"manifest":{"name":"notes","version":"1.0.0","protocol":[1]}}`},
	{"configure params", &protocol.ConfigureParams{
		Entries: []protocol.ConfigEntry{{
			ScopeID: "team", ID: "inbox", Type: "notes", Config: raw(`{"folder":"a"}`),
			Connection: "notes-main", BindingConnections: []string{"notes-bot"},
		}},
		Connections: []protocol.Connection{{
			Name: "notes-main", Type: "notes", Config: raw(`{"url":"https://n.example"}`), SecretNames: []string{"token"},
		}},
		PublicURL: "https://hooks.example",
		DryRun:    true,
		Disabled:  []protocol.ConfigEntry{{ScopeID: "old", ID: "inbox", Type: "notes"}},
		KV:        protocol.KVLayout{Stored: 1, Declared: 2},
	}, `{"entries":[{"scope_id":"team","id":"inbox","type":"notes","config":{"folder":"a"},
			"connection":"notes-main","binding_connections":["notes-bot"]}],
		"connections":[{"name":"notes-main","type":"notes","config":{"url":"https://n.example"},"secret_names":["token"]}],
		"public_url":"https://hooks.example","dry_run":true,
		"disabled":[{"scope_id":"old","id":"inbox","type":"notes"}],
		"kv":{"stored":1,"declared":2}}`},
	{"configure params empty generation", &protocol.ConfigureParams{
		Entries: []protocol.ConfigEntry{}, Connections: []protocol.Connection{},
	}, `{"entries":[],"connections":[],"kv":{"stored":0,"declared":0}}`},
	{"configure result", &protocol.ConfigureResult{
		Sources:      []protocol.SourceDecl{{Name: "notes/inbox", ScopeID: "team", Families: []string{"notes.note"}, Reconcile: true}},
		WebhookPaths: []string{"/notes/team/inbox"},
	}, `{"sources":[{"name":"notes/inbox","scope_id":"team","families":["notes.note"],"reconcile":true}],
		"webhook_paths":["/notes/team/inbox"]}`},
	{"kv.get params", &protocol.KVGetParams{Namespace: "notes.runs", Key: "k"}, `{"namespace":"notes.runs","key":"k"}`},
	{"kv.get found", &protocol.KVGetResult{Found: true, Value: raw(`{"n":1}`), Version: "sha256:ab"},
		`{"found":true,"value":{"n":1},"version":"sha256:ab"}`},
	{"kv.get string value", &protocol.KVGetResult{Found: true, Value: raw(`"aGk="`), Version: "v"},
		`{"found":true,"value":"aGk=","version":"v"}`},
	{"kv.get absent", &protocol.KVGetResult{}, `{"found":false}`},
	{"kv.list params", &protocol.KVListParams{Namespace: "notes", Prefix: "run/", After: "run/1", Limit: 50},
		`{"namespace":"notes","prefix":"run/","after":"run/1","limit":50}`},
	{"kv.list result", &protocol.KVListResult{
		Items: []protocol.KVItem{{Key: "run/2", Value: raw(`[1,2]`), Version: "v2"}}, Next: "run/2",
	}, `{"items":[{"key":"run/2","value":[1,2],"version":"v2"}],"next":"run/2"}`},
	{"kv.commit params", &protocol.KVCommitParams{
		Preconditions: []protocol.KVPrecondition{
			{Namespace: "notes", Key: "a", Version: "v1"},
			{Namespace: "notes", Key: "b", Absent: true},
		},
		Puts:    []protocol.KVPut{{Namespace: "notes", Key: "b", Value: raw(`true`)}},
		Deletes: []protocol.KVKey{{Namespace: "notes", Key: "a"}},
		Emissions: []protocol.Emission{
			{Source: "notes", DeliveryID: "r-1", ScopeID: "team", Family: "notes.report", Schema: "notes.report.v1", Payload: raw(`{}`), OccurredAt: t0},
			{Source: "notes/runs", DeliveryID: "r-2", Family: "notes.report", Type: "done", Parent: "evt_9", Works: []string{"w1"}},
		},
	}, `{"preconditions":[{"namespace":"notes","key":"a","version":"v1"},{"namespace":"notes","key":"b","absent":true}],
		"puts":[{"namespace":"notes","key":"b","value":true}],
		"deletes":[{"namespace":"notes","key":"a"}],
		"emissions":[
			{"source":"notes","delivery_id":"r-1","scope_id":"team","family":"notes.report","schema":"notes.report.v1","payload":{},"occurred_at":"2026-11-30T04:00:00Z"},
			{"source":"notes/runs","delivery_id":"r-2","family":"notes.report","type":"done","parent":"evt_9","works":["w1"]}]}`},
	{"kv.commit result", &protocol.KVCommitResult{Accepted: []protocol.EmissionOutcome{
		{Event: &sampleEvent, Added: true},
		{Refused: protocol.CodeCausalLimit},
	}}, `{"accepted":[{"event":` + sampleEventJSON + `,"added":true},{"added":false,"refused":"causal_limit"}]}`},
	{"kv.commit result without emissions", &protocol.KVCommitResult{}, `{}`},
	{"id params", &protocol.IDParams{ID: "w1"}, `{"id":"w1"}`},
	{"work id params", &protocol.WorkIDParams{WorkID: "w1"}, `{"work_id":"w1"}`},
	{"state.work result", &protocol.WorkResult{Work: sampleWork}, `{"work":` + sampleWorkJSON + `}`},
	{"state.work minimal", &protocol.WorkResult{Work: protocol.Work{ID: "w", ScopeID: "s", Kind: "k", State: "pending", Revision: 1, CreatedAt: t0, UpdatedAt: t0}},
		`{"work":{"id":"w","scope_id":"s","kind":"k","state":"pending","revision":1,"created_at":"2026-11-30T04:00:00Z","updated_at":"2026-11-30T04:00:00Z"}}`},
	{"state.works params", &protocol.WorksParams{ScopeID: "team", Kind: "notes-review", State: "running", CorrelationKey: "notes:1", After: "w0", Limit: 10},
		`{"scope_id":"team","kind":"notes-review","state":"running","correlation_key":"notes:1","after":"w0","limit":10}`},
	{"state.works params empty", &protocol.WorksParams{}, `{}`},
	{"state.works result", &protocol.WorksResult{Works: []protocol.Work{sampleWork}, Next: "w1"},
		`{"works":[` + sampleWorkJSON + `],"next":"w1"}`},
	{"state.executions result", &protocol.ExecutionsResult{Executions: []protocol.Execution{
		{ID: "x1", WorkID: "w1", Attempt: 1, Executor: "notes-run", State: "failed", Error: "exit 1", StartedAt: t0, EndedAt: t1},
		{ID: "x2", WorkID: "w1", Attempt: 2, Executor: "notes-run", State: "starting"},
	}}, `{"executions":[
		{"id":"x1","work_id":"w1","attempt":1,"executor":"notes-run","state":"failed","error":"exit 1",
			"started_at":"2026-11-30T04:00:00Z","ended_at":"2026-11-30T04:05:06Z"},
		{"id":"x2","work_id":"w1","attempt":2,"executor":"notes-run","state":"starting"}]}`},
	{"state.waits result", &protocol.WaitsResult{Waits: []protocol.Wait{{
		ID: "wt1", WorkID: "w1", Keys: []string{"notes:1"}, Target: "job:nightly", Description: "review",
		Progress: "1/2", State: "active", Deadline: t1, CreatedAt: t0,
	}}}, `{"waits":[{"id":"wt1","work_id":"w1","keys":["notes:1"],"target":"job:nightly","description":"review",
		"progress":"1/2","state":"active","deadline":"2026-11-30T04:05:06Z","created_at":"2026-11-30T04:00:00Z"}]}`},
	{"state.event result", &protocol.EventResult{Event: sampleEvent}, `{"event":` + sampleEventJSON + `}`},
	{"state.event root without scope", &protocol.EventResult{Event: protocol.Event{
		ID: "e", Sequence: 1, Source: "notes", DeliveryID: "d", Family: "notes.note", Root: "e", AcceptedAt: t0,
	}}, `{"event":{"id":"e","sequence":1,"source":"notes","delivery_id":"d","family":"notes.note","root":"e","depth":0,"accepted_at":"2026-11-30T04:00:00Z"}}`},
	{"state.events params", &protocol.EventsParams{ScopeID: "team", After: 41, Limit: 1000},
		`{"scope_id":"team","after":41,"limit":1000}`},
	{"state.work_events params", &protocol.WorkEventsParams{ID: "w1", After: 7, Limit: 2},
		`{"id":"w1","after":7,"limit":2}`},
	{"state.events result", &protocol.EventsResult{Events: []protocol.Event{sampleEvent}},
		`{"events":[` + sampleEventJSON + `]}`},
	{"state.scope result", &protocol.ScopeResult{Scope: protocol.Scope{ID: "team", Name: "Team", Config: raw(`{"routes":[]}`)}},
		`{"scope":{"id":"team","name":"Team","config":{"routes":[]}}}`},
	{"state.scopes result", &protocol.ScopesResult{Scopes: []protocol.Scope{{ID: "a"}, {ID: "b"}}},
		`{"scopes":[{"id":"a"},{"id":"b"}]}`},
	{"state.sequence result", &protocol.SequenceResult{Sequence: 99}, `{"sequence":99}`},
	{"state.timers params", &protocol.TimersParams{ScopeID: "team", Kind: "notes-digest"},
		`{"scope_id":"team","kind":"notes-digest"}`},
	{"state.timers result", &protocol.TimersResult{Timers: []protocol.Timer{{
		Key: "notes:digest:team", ScopeID: "team", WorkID: "w1", Kind: "notes-digest", Due: t1,
		Recurrence: "0 9 * * *", Payload: raw(`{"n":1}`),
	}}}, `{"timers":[{"key":"notes:digest:team","scope_id":"team","work_id":"w1","kind":"notes-digest",
		"due":"2026-11-30T04:05:06Z","recurrence":"0 9 * * *","payload":{"n":1}}]}`},
	{"event.accept params", &protocol.EventAcceptParams{
		Source: "notes/runs", DeliveryID: "turn-3", Family: "notes.note", Type: "reply",
		Schema: "notes.note.v2", Payload: raw(`{"text":"ok"}`), Parent: "evt_1", Works: []string{"w1"}, OccurredAt: t0,
		Preconditions: []protocol.KVPrecondition{{Namespace: "notes.turns", Key: "3", Absent: true}},
		Puts:          []protocol.KVPut{{Namespace: "notes.turns", Key: "3", Value: raw(`"evt"`)}},
		Deletes:       []protocol.KVKey{{Namespace: "notes.turns", Key: "2"}},
	}, `{"source":"notes/runs","delivery_id":"turn-3","family":"notes.note","type":"reply",
		"schema":"notes.note.v2","payload":{"text":"ok"},"parent":"evt_1","works":["w1"],"occurred_at":"2026-11-30T04:00:00Z",
		"preconditions":[{"namespace":"notes.turns","key":"3","absent":true}],
		"puts":[{"namespace":"notes.turns","key":"3","value":"evt"}],
		"deletes":[{"namespace":"notes.turns","key":"2"}]}`},
	{"event.accept result", &protocol.EventAcceptResult{Event: sampleEvent, Added: true},
		`{"event":` + sampleEventJSON + `,"added":true}`},
}

func TestWireRoundTrip(t *testing.T) { testRoundTrip(t, wireCases) }

// testRoundTrip checks each case: the value encodes to its golden JSON,
// and the golden JSON decodes strictly to the value.
func testRoundTrip(t *testing.T, cases []wireCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, reflect.Pointer, reflect.TypeOf(tc.value).Kind())
			var golden bytes.Buffer
			require.NoError(t, json.Compact(&golden, []byte(tc.golden)), "golden is not JSON")

			encoded, err := json.Marshal(tc.value)
			require.NoError(t, err)
			assert.JSONEq(t, golden.String(), string(encoded), "encoding differs from golden")

			decoded := reflect.New(reflect.TypeOf(tc.value).Elem()).Interface()
			dec := json.NewDecoder(bytes.NewReader(golden.Bytes()))
			dec.DisallowUnknownFields()
			require.NoError(t, dec.Decode(decoded), "golden does not decode strictly")
			assert.Equal(t, tc.value, decoded, "decoded golden differs from the value")
		})
	}
}

// TestWireCasesCoverEveryShape checks that the round-trip table exercises
// the params and result type of every method with wire types.
func TestWireCasesCoverEveryShape(t *testing.T) {
	covered := map[reflect.Type]bool{}
	for _, tc := range wireCases {
		covered[reflect.TypeOf(tc.value).Elem()] = true
	}
	for _, typ := range protocol.ShapeTypesForTest() {
		assert.True(t, covered[typ], "no round-trip case for %s", typ)
	}
}

// TestWireNamesAreSnakeCase walks every wire type reachable from a method
// shape (messages.go's too) and checks each JSON field name.
func TestWireNamesAreSnakeCase(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ == reflect.TypeOf(time.Time{}) {
			return
		}
		seen[typ] = true
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			tag := f.Tag.Get("json")
			require.NotEmpty(t, tag, "%s.%s has no json tag", typ, f.Name)
			name, _, _ := bytes.Cut([]byte(tag), []byte(","))
			assert.Regexp(t, codeShape, string(name), "%s.%s", typ, f.Name)
			walk(f.Type)
		}
	}
	for _, typ := range protocol.AllShapeTypesForTest() {
		walk(typ)
	}
	assert.NotEmpty(t, seen)
}

// TestShapesAreCatalogued checks that every method with wire types is in
// the method catalogue, in the direction its types imply.
func TestShapesAreCatalogued(t *testing.T) {
	require.NotEmpty(t, protocol.Methods(), "the method catalogue is empty")
	hostCalls := map[string]bool{"initialize": true, "configure": true, "shutdown": true}
	for _, name := range protocol.ShapeMethodsForTest() {
		m, ok := protocol.LookupMethod(name)
		if !assert.True(t, ok, "%s has wire types but is not catalogued", name) {
			continue
		}
		want := protocol.ExtensionToHost
		if hostCalls[name] {
			want = protocol.HostToExtension
		}
		assert.Equal(t, want, m.Direction, "%s", name)
		assert.False(t, m.Notification, "%s has a result, so it is not a notification", name)
		assert.False(t, m.InTransaction, "%s", name)
	}
	for _, name := range protocol.AllShapeMethodsForTest() {
		_, ok := protocol.LookupMethod(name)
		assert.True(t, ok, "%s has wire types but is not catalogued", name)
	}
}
