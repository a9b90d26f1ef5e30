package protocol_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

var sampleAuthority = protocol.Authority{ScopeID: "team", WorkID: "w1", ExecutionID: "x1", Binding: "b", Connection: "notes-main"}

const sampleAuthorityJSON = `{"scope_id":"team","work_id":"w1","execution_id":"x1","binding":"b","connection":"notes-main"}`

var sampleDraft = protocol.EventDraft{
	Source: "notes/inbox", DeliveryID: "d-1", ScopeID: "team", Family: "notes.note", Type: "created",
	Schema: "notes.note.v3", Payload: raw(`{"body":"hi"}`), Works: []string{"w1"}, OccurredAt: t0,
}

const sampleDraftJSON = `{"source":"notes/inbox","delivery_id":"d-1","scope_id":"team","family":"notes.note","type":"created",
	"schema":"notes.note.v3","payload":{"body":"hi"},"works":["w1"],"occurred_at":"2026-11-30T04:00:00Z"}`

var sampleTimer = protocol.Timer{Key: "digest", ScopeID: "team", Kind: "notes-digest", Due: t1, Recurrence: "notes-digest"}

const sampleTimerJSON = `{"key":"digest","scope_id":"team","kind":"notes-digest","due":"2026-11-30T04:05:06Z","recurrence":"notes-digest"}`

var sampleExecution = protocol.Execution{ID: "x1", WorkID: "w1", Attempt: 1, Executor: "notes-run", State: "running", StartedAt: t0}

const sampleExecutionJSON = `{"id":"x1","work_id":"w1","attempt":1,"executor":"notes-run","state":"running","started_at":"2026-11-30T04:00:00Z"}`

// messageCases pins the JSON of every type in messages.go: the Go value,
// encoded, equals the golden JSON, and the golden JSON, decoded strictly,
// equals the Go value.
var messageCases = []wireCase{
	{"validate params", &protocol.ValidateParams{Kind: protocol.ValidateBinding, Type: "notes", ScopeID: "team", ID: "r1",
		Config: raw(`{"tag":"x"}`), Binding: &protocol.BindingView{Name: "review", Executor: "runner", ExecutorConfig: raw(`{}`),
			Operations: []string{"notes.add"}, Toolsets: []string{"notes.agent"}, Connection: "gh"}, SecretNames: []string{"token"}},
		`{"kind":"binding","type":"notes","scope_id":"team","id":"r1","config":{"tag":"x"},
		"binding":{"name":"review","executor":"runner","executor_config":{},"operations":["notes.add"],"toolsets":["notes.agent"],"connection":"gh"},
		"secret_names":["token"]}`},
	{"validate result", &protocol.ValidateResult{Describe: []string{"a note store"}, Warnings: []string{"dir is ignored"}},
		`{"describe":["a note store"],"warnings":["dir is ignored"]}`},
	{"route.match params", &protocol.RouteMatchParams{Handler: "notes", ScopeID: "team", RouteID: "r1", Config: raw(`{"folder":"a"}`), Event: sampleEvent, Work: &sampleWork},
		`{"handler":"notes","scope_id":"team","route_id":"r1","config":{"folder":"a"},"event":` + sampleEventJSON + `,"work":` + sampleWorkJSON + `}`},
	{"route.match result", &protocol.RouteMatchResult{Match: true, Reason: "a note", Kind: "notes-review", CorrelationKeys: []string{"notes:1"},
		Display: &protocol.Display{Title: "Fix it", Ref: "#1", Requester: "ann", Links: []protocol.DisplayLink{{Label: "Note 1", URL: "https://n.example/1"}}},
		Context: raw(`{"model":"m"}`), Grants: []string{"write"}},
		`{"match":true,"reason":"a note","kind":"notes-review","correlation_keys":["notes:1"],
		"display":{"title":"Fix it","ref":"#1","requester":"ann","links":[{"label":"Note 1","url":"https://n.example/1"}]},
		"context":{"model":"m"},"grants":["write"]}`},
	{"route.match no match", &protocol.RouteMatchResult{}, `{"match":false}`},
	{"route.samples params", &protocol.RouteSamplesParams{Handler: "notes", ScopeID: "team", RouteID: "r1", Config: raw(`{}`), Now: t0},
		`{"handler":"notes","scope_id":"team","route_id":"r1","config":{},"now":"2026-11-30T04:00:00Z"}`},
	{"route.samples result", &protocol.RouteSamplesResult{Samples: []protocol.RouteSample{{ID: "hello", Title: "Hello", Event: sampleDraft}}},
		`{"samples":[{"id":"hello","title":"Hello","event":` + sampleDraftJSON + `}]}`},

	{"ingress.push params", &protocol.IngressPushParams{Type: "notes", Source: "notes/inbox", ScopeID: "team", EntryID: "inbox",
		Delivery: protocol.Delivery{ID: "d-1", Path: "/notes/inbox", Headers: map[string][]string{"X-Sig": {"abc"}}, Body: []byte("hi"), ReceivedAt: t0}},
		`{"type":"notes","source":"notes/inbox","scope_id":"team","entry_id":"inbox",
		"delivery":{"id":"d-1","path":"/notes/inbox","headers":{"X-Sig":["abc"]},"body":"aGk=","received_at":"2026-11-30T04:00:00Z"}}`},
	{"ingress.push result", &protocol.IngressPushResult{Events: []protocol.EventDraft{sampleDraft}}, `{"events":[` + sampleDraftJSON + `]}`},
	{"webhook.handle params", &protocol.WebhookHandleParams{Method: "POST", Path: "/notes/team/inbox", WebhookPath: "/notes/team/inbox",
		Query: "a=1", Headers: map[string][]string{"X-Notes-Signature": {"sha256=00"}}, Body: []byte("hi"), ReceivedAt: t0},
		`{"method":"POST","path":"/notes/team/inbox","webhook_path":"/notes/team/inbox","query":"a=1",
		"headers":{"X-Notes-Signature":["sha256=00"]},"body":"aGk=","received_at":"2026-11-30T04:00:00Z"}`},
	{"webhook.handle result", &protocol.WebhookHandleResult{Events: []protocol.EventDraft{sampleDraft}}, `{"events":[` + sampleDraftJSON + `]}`},
	{"ingress.reconcile params", &protocol.IngressReconcileParams{Type: "notes", Source: "notes/inbox", ScopeID: "team", EntryID: "inbox", Cursor: "p2", MaxItems: 100, MaxBytes: 1 << 20},
		`{"type":"notes","source":"notes/inbox","scope_id":"team","entry_id":"inbox","cursor":"p2","max_items":100,"max_bytes":1048576}`},
	{"ingress.reconcile result", &protocol.IngressReconcileResult{Observations: []protocol.Observation{{Item: "n1", Version: "rev3.s3", Event: sampleDraft}}, Next: "p3", Complete: true},
		`{"observations":[{"item":"n1","version":"rev3.s3","event":` + sampleDraftJSON + `}],"next":"p3","complete":true}`},
	{"ingress.deliver params", &protocol.IngressDeliverParams{Source: "notes/inbox", Events: []protocol.EventDraft{sampleDraft}},
		`{"source":"notes/inbox","events":[` + sampleDraftJSON + `]}`},
	{"ingress.deliver result", &protocol.IngressDeliverResult{Accepted: []protocol.EmissionOutcome{{Event: &sampleEvent, Added: true}}},
		`{"accepted":[{"event":` + sampleEventJSON + `,"added":true}]}`},

	{"operation.call params", &protocol.OperationCallParams{Operation: "notes.add", RequestID: "req-1", Input: raw(`{"text":"hi"}`), Authority: sampleAuthority},
		`{"operation":"notes.add","request_id":"req-1","input":{"text":"hi"},"authority":` + sampleAuthorityJSON + `}`},
	{"operation.call result", &protocol.OperationCallResult{Output: raw(`{"id":"n1"}`)}, `{"output":{"id":"n1"}}`},
	{"operation.wait params", &protocol.OperationWaitParams{Operation: "notes.await", RequestID: "req-2", Input: raw(`{}`), Authority: sampleAuthority},
		`{"operation":"notes.await","request_id":"req-2","input":{},"authority":` + sampleAuthorityJSON + `}`},
	{"operation.wait result", &protocol.OperationWaitResult{Wait: protocol.WaitPlan{Keys: []string{"notes:1"}, Target: "note:1", Deadline: t1, Description: "note 1 to change"}, Output: raw(`true`)},
		`{"wait":{"keys":["notes:1"],"target":"note:1","deadline":"2026-11-30T04:05:06Z","description":"note 1 to change"},"output":true}`},
	{"operation.emit params", &protocol.OperationEmitParams{Operation: "notes.post", RequestID: "req-3", Input: raw(`{}`), Authority: protocol.Authority{ScopeID: "team"}},
		`{"operation":"notes.post","request_id":"req-3","input":{},"authority":{"scope_id":"team"}}`},
	{"operation.emit result", &protocol.OperationEmitResult{Event: sampleDraft, Commit: raw(`{"index":1}`), Output: raw(`"ok"`)},
		`{"event":` + sampleDraftJSON + `,"commit":{"index":1},"output":"ok"}`},
	{"emit.commit params", &protocol.EmitCommitParams{Operation: "notes.post", RequestID: "req-3", Event: sampleEvent, Commit: raw(`{"index":1}`)},
		`{"operation":"notes.post","request_id":"req-3","event":` + sampleEventJSON + `,"commit":{"index":1}}`},
	{"emit.commit result", &protocol.EmitCommitResult{Puts: []protocol.KVPut{{Namespace: "notes", Key: "k", Value: raw(`1`)}}, Deletes: []protocol.KVKey{{Namespace: "notes", Key: "old"}}},
		`{"puts":[{"namespace":"notes","key":"k","value":1}],"deletes":[{"namespace":"notes","key":"old"}]}`},
	{"dependency.filter params", &protocol.DependencyFilterParams{Operation: "notes.await",
		Wait: protocol.Wait{ID: "wt1", WorkID: "w1", State: "active", CreatedAt: t0}, Event: sampleEvent},
		`{"operation":"notes.await","wait":{"id":"wt1","work_id":"w1","state":"active","created_at":"2026-11-30T04:00:00Z"},"event":` + sampleEventJSON + `}`},
	{"dependency.filter result", &protocol.DependencyFilterResult{Match: true}, `{"match":true}`},

	{"recurrence.next params", &protocol.RecurrenceNextParams{Recurrence: "notes-digest", Timer: sampleTimer, Now: t1},
		`{"recurrence":"notes-digest","timer":` + sampleTimerJSON + `,"now":"2026-11-30T04:05:06Z"}`},
	{"recurrence.next result", &protocol.RecurrenceNextResult{Next: t1, Schema: "notes.digest.v1", Payload: raw(`{}`)},
		`{"next":"2026-11-30T04:05:06Z","schema":"notes.digest.v1","payload":{}}`},
	{"recurrence.next end", &protocol.RecurrenceNextResult{}, `{}`},
	{"work_kind.trigger params", &protocol.WorkKindTriggerParams{Kind: "notes-review", Work: sampleWork, Inputs: []protocol.Event{sampleEvent}},
		`{"kind":"notes-review","work":` + sampleWorkJSON + `,"inputs":[` + sampleEventJSON + `]}`},
	{"work_kind.trigger result", &protocol.WorkKindTriggerResult{Trigger: "evt_1"}, `{"trigger":"evt_1"}`},
	{"timer.arm params", &protocol.TimerArmParams{Key: "digest", Recurrence: "notes-digest", ScopeID: "team", WorkID: "w1", Due: t1, Schema: "notes.digest.v1", Payload: raw(`{}`)},
		`{"key":"digest","recurrence":"notes-digest","scope_id":"team","work_id":"w1","due":"2026-11-30T04:05:06Z","schema":"notes.digest.v1","payload":{}}`},
	{"timer.arm result", &protocol.TimerArmResult{Timer: sampleTimer}, `{"timer":` + sampleTimerJSON + `}`},
	{"timer.cancel params", &protocol.TimerCancelParams{Key: "digest"}, `{"key":"digest"}`},
	{"timer.cancel result", &protocol.TimerCancelResult{Cancelled: true}, `{"cancelled":true}`},
	{"work.cancel params", &protocol.WorkCancelParams{WorkID: "w1", Reason: "entry removed"}, `{"work_id":"w1","reason":"entry removed"}`},
	{"work.cancel result", &protocol.WorkCancelResult{}, `{"cancelled":false}`},
	{"wait.progress params", &protocol.WaitProgressParams{WorkID: "w1", Progress: "3 of 7 checks finished"}, `{"work_id":"w1","progress":"3 of 7 checks finished"}`},
	{"wait.progress clear", &protocol.WaitProgressParams{WorkID: "w1"}, `{"work_id":"w1","progress":""}`},
	{"wait.progress result", &protocol.WaitProgressResult{}, `{}`},

	{"task.run params", &protocol.TaskRunParams{Task: "notes-sweep", Now: t0}, `{"task":"notes-sweep","now":"2026-11-30T04:00:00Z"}`},
	{"task.run result", &protocol.TaskRunResult{Detail: "swept 3"}, `{"detail":"swept 3"}`},
	{"check.run params", &protocol.CheckRunParams{Check: "notes", Deep: true, Config: raw(`{"dir":"/etc/oc"}`)}, `{"check":"notes","deep":true,"config":{"dir":"/etc/oc"}}`},
	{"check.run short result", &protocol.CheckRunResult{OK: true, Detail: "fine"}, `{"ok":true,"detail":"fine"}`},
	{"check.run full result", &protocol.CheckRunResult{Status: protocol.CheckWarn, Code: "notes_stale", Detail: "2 stale", Items: []string{"a", "b"}},
		`{"status":"warn","code":"notes_stale","detail":"2 stale","items":["a","b"]}`},
	{"secret.resolve params", &protocol.SecretResolveParams{Connection: "notes-main", ScopeID: "team", Names: []string{"token"}},
		`{"connection":"notes-main","scope_id":"team","names":["token"]}`},
	{"secret.resolve result", &protocol.SecretResolveResult{Values: map[string]string{"token": "s3cret"}}, `{"values":{"token":"s3cret"}}`},

	{"executor.run params", &protocol.ExecutorRunParams{Executor: "notes-run", RunID: "run-1", Work: sampleWork, Execution: sampleExecution,
		Config: raw(`{"cmd":"x"}`), Inputs: []protocol.Event{sampleEvent}, Endpoint: "http://127.0.0.1:9/t", Token: "tok", Env: map[string]string{"A": "1"}},
		`{"executor":"notes-run","run_id":"run-1","work":` + sampleWorkJSON + `,"execution":` + sampleExecutionJSON + `,
		"config":{"cmd":"x"},"inputs":[` + sampleEventJSON + `],"endpoint":"http://127.0.0.1:9/t","token":"tok","env":{"A":"1"}}`},
	{"executor.run result", &protocol.ExecutorRunResult{Recovery: raw(`{"pid":42}`)}, `{"recovery":{"pid":42}}`},
	{"executor.wait params", &protocol.ExecutorWaitParams{Executor: "notes-run", RunID: "run-1"}, `{"executor":"notes-run","run_id":"run-1"}`},
	{"executor.wait result", &protocol.ExecutorWaitResult{State: "failed", ExitCode: 2, Error: "exit status 2", Output: raw(`{}`)},
		`{"state":"failed","exit_code":2,"error":"exit status 2","output":{}}`},
	{"executor.recover params", &protocol.ExecutorRecoverParams{Executor: "notes-run", RunID: "run-1", Work: sampleWork, Execution: sampleExecution, Recovery: raw(`{"pid":42}`)},
		`{"executor":"notes-run","run_id":"run-1","work":` + sampleWorkJSON + `,"execution":` + sampleExecutionJSON + `,"recovery":{"pid":42}}`},
	{"executor.recover result", &protocol.ExecutorRecoverResult{}, `{}`},
	{"executor.resume params", &protocol.ExecutorResumeParams{Executor: "notes-run", RunID: "run-1", Inputs: []protocol.Event{sampleEvent}},
		`{"executor":"notes-run","run_id":"run-1","inputs":[` + sampleEventJSON + `]}`},
	{"executor.resume result", &protocol.ExecutorResumeResult{}, `{}`},
	{"executor.inject params", &protocol.ExecutorInjectParams{Executor: "notes-run", RunID: "run-1", Text: "also this", Events: []protocol.Event{sampleEvent}},
		`{"executor":"notes-run","run_id":"run-1","text":"also this","events":[` + sampleEventJSON + `]}`},
	{"executor.inject result", &protocol.ExecutorInjectResult{}, `{}`},
	{"executor.interrupt params", &protocol.ExecutorInterruptParams{Executor: "notes-run", RunID: "run-1"}, `{"executor":"notes-run","run_id":"run-1"}`},
	{"executor.interrupt result", &protocol.ExecutorInterruptResult{}, `{}`},
	{"executor.stop params", &protocol.ExecutorStopParams{Executor: "notes-run", RunID: "run-1", Epoch: 3}, `{"executor":"notes-run","run_id":"run-1","epoch":3}`},
	{"executor.stop result", &protocol.ExecutorStopResult{Stopped: true, Evidence: "process group 42 reaped"}, `{"stopped":true,"evidence":"process group 42 reaped"}`},
	{"executor.forget params", &protocol.ExecutorForgetParams{Executor: "notes-run", RunID: "run-1"}, `{"executor":"notes-run","run_id":"run-1"}`},
	{"executor.forget result", &protocol.ExecutorForgetResult{}, `{}`},
	{"executor.attach params", &protocol.ExecutorAttachParams{Executor: "notes-run", RunID: "run-1"}, `{"executor":"notes-run","run_id":"run-1"}`},
	{"executor.attach result", &protocol.ExecutorAttachResult{Argv: []string{"tmux", "attach"}, Dir: "/w", Env: map[string]string{"T": "1"}},
		`{"argv":["tmux","attach"],"dir":"/w","env":{"T":"1"}}`},
	{"executor.live params", &protocol.ExecutorLiveParams{Executor: "notes-run", RunID: "run-1", Tail: 4096}, `{"executor":"notes-run","run_id":"run-1","tail":4096}`},
	{"executor.live result", &protocol.ExecutorLiveResult{Outputs: []protocol.LiveOutput{{Name: "stdout", MediaType: "text/plain", Size: 2, Tail: []byte("ok")}}},
		`{"outputs":[{"name":"stdout","media_type":"text/plain","size":2,"tail":"b2s="}]}`},
	{"execution.persist_recovery params", &protocol.ExecutionPersistRecoveryParams{RunID: "run-1", Recovery: raw(`{"pid":42}`)}, `{"run_id":"run-1","recovery":{"pid":42}}`},
	{"execution.persist_recovery result", &protocol.ExecutionPersistRecoveryResult{}, `{}`},

	{"artifact.create params", &protocol.ArtifactCreateParams{RunID: "run-1", Name: "log.txt", MediaType: "text/plain"}, `{"run_id":"run-1","name":"log.txt","media_type":"text/plain"}`},
	{"artifact.create result", &protocol.ArtifactCreateResult{ArtifactID: "art-1"}, `{"artifact_id":"art-1"}`},
	{"artifact.write params", &protocol.ArtifactWriteParams{ArtifactID: "art-1", Offset: 262144, Data: []byte{0, 1, 2}}, `{"artifact_id":"art-1","offset":262144,"data":"AAEC"}`},
	{"artifact.write result", &protocol.ArtifactWriteResult{Size: 262147}, `{"size":262147}`},
	{"artifact.commit params", &protocol.ArtifactCommitParams{ArtifactID: "art-1", Size: 262147}, `{"artifact_id":"art-1","size":262147}`},
	{"artifact.commit result", &protocol.ArtifactCommitResult{ArtifactID: "art-1", Size: 262147, SHA256: "ab12"}, `{"artifact_id":"art-1","size":262147,"sha256":"ab12"}`},
	{"artifact.abort params", &protocol.ArtifactAbortParams{ArtifactID: "art-1"}, `{"artifact_id":"art-1"}`},
	{"artifact.abort result", &protocol.ArtifactAbortResult{}, `{}`},
	{"telemetry.capture params", &protocol.TelemetryCaptureParams{ScopeID: "team", Name: "notes.synced", Properties: raw(`{"notes":3}`)},
		`{"scope_id":"team","name":"notes.synced","properties":{"notes":3}}`},
	{"telemetry.capture result", &protocol.TelemetryCaptureResult{}, `{}`},
	{"telemetry.sink params", &protocol.TelemetrySinkParams{Events: []protocol.TelemetryEvent{
		{Name: "notes.synced", ScopeID: "team", Extension: "notes", Properties: raw(`{"notes":3}`), Time: t0}}},
		`{"events":[{"name":"notes.synced","scope_id":"team","extension":"notes","properties":{"notes":3},"time":"2026-11-30T04:00:00Z"}]}`},
	{"telemetry.sink result", &protocol.TelemetrySinkResult{}, `{}`},
}

func TestMessagesRoundTrip(t *testing.T) { testRoundTrip(t, messageCases) }

// TestMessagesCoverEveryShape checks that every params and result type of
// messages.go has a round-trip case, and that each shape's method is in
// the catalogue.
func TestMessagesCoverEveryShape(t *testing.T) {
	covered := map[reflect.Type]bool{}
	for _, tc := range messageCases {
		covered[reflect.TypeOf(tc.value).Elem()] = true
	}
	shapes := protocol.MessageShapesForTest()
	require.NotEmpty(t, shapes)
	for method, types := range shapes {
		_, ok := protocol.LookupMethod(method)
		assert.True(t, ok, "%s is not in the catalogue", method)
		for _, typ := range types {
			assert.True(t, covered[typ], "no round-trip case for %s (%s)", typ, method)
		}
	}
}
