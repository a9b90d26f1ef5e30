package sdk_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// TestHostHelpers checks that each Host helper sends its method with its
// params and returns the host's answer, in process and over the wire.
func TestHostHelpers(t *testing.T) {
	due := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	ev := event("demo.note.v3", `{"body":"x","tags":[]}`)
	work := protocol.Work{ID: "w1", ScopeID: "team", Kind: "demo-review", State: "waiting", CreatedAt: due, UpdatedAt: due}
	cases := []struct {
		method string
		params any
		result any
		call   func(ctx context.Context, h *sdk.Host) (any, error)
		want   any
	}{
		{"state.work", protocol.IDParams{ID: "w1"}, protocol.WorkResult{Work: work},
			func(ctx context.Context, h *sdk.Host) (any, error) { return h.Work(ctx, "w1") }, work},
		{"state.works", protocol.WorksParams{Kind: "demo-review"}, protocol.WorksResult{Works: []protocol.Work{work}},
			func(ctx context.Context, h *sdk.Host) (any, error) {
				return h.Works(ctx, protocol.WorksParams{Kind: "demo-review"})
			}, protocol.WorksResult{Works: []protocol.Work{work}}},
		{"state.event", protocol.IDParams{ID: "evt_1"}, protocol.EventResult{Event: ev},
			func(ctx context.Context, h *sdk.Host) (any, error) { return h.Event(ctx, "evt_1") }, ev},
		{"state.events", protocol.EventsParams{ScopeID: "team", After: 3}, protocol.EventsResult{Events: []protocol.Event{ev}},
			func(ctx context.Context, h *sdk.Host) (any, error) {
				return h.Events(ctx, protocol.EventsParams{ScopeID: "team", After: 3})
			}, []protocol.Event{ev}},
		{"state.work_events", protocol.WorkEventsParams{ID: "w1"}, protocol.EventsResult{Events: []protocol.Event{ev}},
			func(ctx context.Context, h *sdk.Host) (any, error) {
				return h.WorkEvents(ctx, protocol.WorkEventsParams{ID: "w1"})
			}, []protocol.Event{ev}},
		{"state.scopes", protocol.Empty{}, protocol.ScopesResult{Scopes: []protocol.Scope{{ID: "team"}}},
			func(ctx context.Context, h *sdk.Host) (any, error) { return h.Scopes(ctx) }, []protocol.Scope{{ID: "team"}}},
		{"state.sequence", protocol.Empty{}, protocol.SequenceResult{Sequence: 42},
			func(ctx context.Context, h *sdk.Host) (any, error) { return h.Sequence(ctx) }, int64(42)},
		{"state.waits", protocol.WorkIDParams{WorkID: "w1"}, protocol.WaitsResult{Waits: []protocol.Wait{{ID: "wt", WorkID: "w1", State: "active", CreatedAt: due}}},
			func(ctx context.Context, h *sdk.Host) (any, error) { return h.Waits(ctx, "w1") },
			[]protocol.Wait{{ID: "wt", WorkID: "w1", State: "active", CreatedAt: due}}},
		{"state.timers", protocol.TimersParams{Kind: "demo-digest"}, protocol.TimersResult{Timers: []protocol.Timer{{Key: "k", Due: due}}},
			func(ctx context.Context, h *sdk.Host) (any, error) {
				return h.Timers(ctx, protocol.TimersParams{Kind: "demo-digest"})
			}, []protocol.Timer{{Key: "k", Due: due}}},
		{"event.accept", protocol.EventAcceptParams{Source: "demo", DeliveryID: "d", Family: "demo.note", Parent: "evt_1"}, protocol.EventAcceptResult{Event: ev, Added: true},
			func(ctx context.Context, h *sdk.Host) (any, error) {
				return h.EventAccept(ctx, protocol.EventAcceptParams{Source: "demo", DeliveryID: "d", Family: "demo.note", Parent: "evt_1"})
			}, protocol.EventAcceptResult{Event: ev, Added: true}},
		{"timer.arm", protocol.TimerArmParams{Key: "k", Recurrence: "demo-digest", ScopeID: "team", Due: due}, protocol.TimerArmResult{Timer: protocol.Timer{Key: "k", Due: due}},
			func(ctx context.Context, h *sdk.Host) (any, error) {
				return h.TimerArm(ctx, protocol.TimerArmParams{Key: "k", Recurrence: "demo-digest", ScopeID: "team", Due: due})
			}, protocol.Timer{Key: "k", Due: due}},
		{"timer.cancel", protocol.TimerCancelParams{Key: "k"}, protocol.TimerCancelResult{Cancelled: true},
			func(ctx context.Context, h *sdk.Host) (any, error) { return h.TimerCancel(ctx, "k") }, true},
		{"work.cancel", protocol.WorkCancelParams{WorkID: "w1", Reason: "gone"}, protocol.WorkCancelResult{Cancelled: true},
			func(ctx context.Context, h *sdk.Host) (any, error) { return h.WorkCancel(ctx, "w1", "gone") }, true},
		{"wait.progress", protocol.WaitProgressParams{WorkID: "w1", Progress: "1 of 2"}, protocol.WaitProgressResult{},
			func(ctx context.Context, h *sdk.Host) (any, error) { return nil, h.WaitProgress(ctx, "w1", "1 of 2") }, nil},
		{"ingress.deliver", protocol.IngressDeliverParams{Source: "demo/inbox", Events: []protocol.EventDraft{{Source: "demo/inbox", DeliveryID: "d", Family: "demo.note"}}},
			protocol.IngressDeliverResult{Accepted: []protocol.EmissionOutcome{{Event: &ev, Added: true}}},
			func(ctx context.Context, h *sdk.Host) (any, error) {
				return h.IngressDeliver(ctx, protocol.IngressDeliverParams{Source: "demo/inbox", Events: []protocol.EventDraft{{Source: "demo/inbox", DeliveryID: "d", Family: "demo.note"}}})
			}, protocol.IngressDeliverResult{Accepted: []protocol.EmissionOutcome{{Event: &ev, Added: true}}}},
		{"secret.resolve", protocol.SecretResolveParams{Connection: "c", Names: []string{"token"}}, protocol.SecretResolveResult{Values: map[string]string{"token": "t"}},
			func(ctx context.Context, h *sdk.Host) (any, error) {
				return h.SecretResolve(ctx, protocol.SecretResolveParams{Connection: "c", Names: []string{"token"}})
			}, map[string]string{"token": "t"}},
		{"execution.persist_recovery", protocol.ExecutionPersistRecoveryParams{RunID: "run-1", Recovery: json.RawMessage(`{"pid":1}`)}, protocol.ExecutionPersistRecoveryResult{},
			func(ctx context.Context, h *sdk.Host) (any, error) {
				return nil, h.PersistRecovery(ctx, "run-1", json.RawMessage(`{"pid":1}`))
			}, nil},
	}
	for _, m := range []string{"wire", "inprocess"} {
		for _, tc := range cases {
			t.Run(m+"/"+tc.method, func(t *testing.T) {
				fake := sdktest.New()
				var gotMethod string
				var gotParams json.RawMessage
				fake.Override = func(ctx context.Context, method string, params any) (any, bool, error) {
					gotMethod = method
					var err error
					if raw, ok := params.(json.RawMessage); ok {
						gotParams = raw
					} else {
						gotParams, err = json.Marshal(params)
					}
					return tc.result, true, err
				}
				got, err := tc.call(testContext(t), hostOver(t, m, fake))
				require.NoError(t, err)
				assert.Equal(t, tc.method, gotMethod)
				want, err := json.Marshal(tc.params)
				require.NoError(t, err)
				assert.JSONEq(t, string(want), string(gotParams))
				if tc.want != nil {
					assert.Equal(t, tc.want, got)
				}
			})
		}
	}
}

// TestHostChecksWritesEarly: a payload the extension may not write is
// refused before it crosses, with the host's own code.
func TestHostChecksWritesEarly(t *testing.T) {
	ctx := testContext(t)
	fake := sdktest.New()
	h := hostOver(t, "inprocess", fake)
	_, err := h.EventAccept(ctx, protocol.EventAcceptParams{Source: "demo", DeliveryID: "d", Family: "demo.note", Schema: "demo.note.v2", Parent: "evt_1"})
	assert.ErrorIs(t, err, protocol.ErrUnreadableSchema)
	_, err = h.TimerArm(ctx, protocol.TimerArmParams{Key: "k", Recurrence: "demo-digest", Schema: "demo.note.v9"})
	assert.ErrorIs(t, err, protocol.ErrUnreadableSchema)
	_, err = h.IngressDeliver(ctx, protocol.IngressDeliverParams{Source: "demo", Events: []protocol.EventDraft{{Schema: "demo.other.v1"}}})
	assert.ErrorIs(t, err, protocol.ErrUnreadableSchema)
	assert.Empty(t, fake.Calls(), "nothing crossed")
}
