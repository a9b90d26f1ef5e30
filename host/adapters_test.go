package host_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/runtime"
)

// adapterConns runs f against the SDK extension adaptExtension makes,
// attached in process and running as a process.
func adapterConns(t *testing.T, f func(t *testing.T, conn host.Conn)) {
	extensionBothWays(t, "adapt", manifestJSON("adapt", "sdk", adaptProvides("adapt"), nil), adaptExtension,
		func(t *testing.T, conn host.Conn, _ *fixture) { f(t, conn) })
}

// extensionBothWays runs f against the extension mk makes from the manifest raw:
// attached in process (served by sdk.Attach) and as a process named name
// (the test binary serving it), each on a fresh fixture.
func extensionBothWays(t *testing.T, name string, raw []byte, mk func([]byte) *sdk.Extension, f func(t *testing.T, conn host.Conn, fx *fixture)) {
	t.Run("in_process", func(t *testing.T) {
		fx := newFixture(t)
		m, err := protocol.ParseManifest(raw)
		require.NoError(t, err)
		svc := host.NewService(host.ServiceConfig{Manifest: m, Store: fx.store})
		ext, err := sdk.Attach(mk(raw), svc)
		require.NoError(t, err)
		att, err := host.Attach(ctxT(t), ext, svc, t.TempDir(), protocol.ConfigureParams{})
		require.NoError(t, err)
		f(t, att, fx)
	})
	t.Run("over_the_wire", func(t *testing.T) {
		fx := newFixture(t)
		p, _ := fx.process(name, raw, func(c *host.Config) {
			c.Configure = func() protocol.ConfigureParams { return protocol.ConfigureParams{} }
		})
		require.NoError(t, p.Start(ctxT(t)))
		f(t, p, fx)
	})
}

func event(id, typ, schema string) runtime.Event {
	return runtime.Event{Envelope: runtime.Envelope{ID: id, Source: "adapt/in", DeliveryID: id, ScopeID: "s1",
		Family: "adapt.note", Type: typ, Schema: schema}, Sequence: 1, Root: id}
}

func TestAdapterRouteHandlerWithSchemaGate(t *testing.T) {
	adapterConns(t, func(t *testing.T, conn host.Conn) {
		r := host.NewRemote(conn)
		h := r.RouteHandler("adapt")
		d, err := h.Match(ctxT(t), runtime.RouteInput{ScopeID: "s1", Route: runtime.Route{Handler: "adapt"}, Event: event("e1", "match", "adapt.note.v1")})
		require.NoError(t, err)
		assert.True(t, d.Match)
		assert.Equal(t, []string{"k:e1"}, d.CorrelationKeys)
		require.NotNil(t, d.Display)
		assert.Equal(t, "matched", d.Display.Title)
		// A payload written by a newer release is not this one's to judge.
		d, err = h.Match(ctxT(t), runtime.RouteInput{ScopeID: "s1", Event: event("e2", "match", "adapt.note.v2")})
		require.NoError(t, err)
		assert.False(t, d.Match)
		assert.Equal(t, int64(1), r.SchemaSkips())
	})
}

func TestAdapterInTransactionCallbacks(t *testing.T) {
	adapterConns(t, func(t *testing.T, conn host.Conn) {
		r := host.NewRemote(conn)
		due := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
		next, err := r.Recurrence("adapt-tick").Next(runtime.Timer{Kind: "adapt-tick", Due: due, Recurrence: "hourly"}, due)
		require.NoError(t, err)
		assert.Equal(t, due.Add(time.Hour), next.Due)

		wk := r.WorkKind("adapt")
		assert.False(t, wk.Standing())
		i, err := wk.Trigger([]runtime.Event{event("a", "x", ""), event("b", "x", "")})
		require.NoError(t, err)
		assert.Equal(t, 1, i)
		i, err = wk.Trigger([]runtime.Event{event("a", "x", ""), event("b", "fail", "")})
		require.NoError(t, err, "a failed trigger never fails the transaction")
		assert.Equal(t, 0, i, "it falls back to the first input")

		f := r.DependencyFilter("adapt.wait")
		w := runtime.Wait{ID: "w", WorkID: "wk", State: runtime.WaitActive}
		ok, err := f.Matches(w, event("a", "wake", ""))
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = f.Matches(w, event("a", "fail", ""))
		require.NoError(t, err)
		assert.False(t, ok, "a failing filter counts as no match")
		ok, err = f.Matches(w, event("a", "wake", "adapt.note.v0x"))
		require.NoError(t, err)
		assert.False(t, ok, "an unreadable payload counts as no match")
	})
}

func TestAdapterTaskAndCheck(t *testing.T) {
	adapterConns(t, func(t *testing.T, conn host.Conn) {
		r := host.NewRemote(conn)
		require.NoError(t, r.Task().Run(ctxT(t), "adapt-pass"))
		res, err := r.Check().Run(ctxT(t), "adapt", false)
		require.NoError(t, err)
		assert.Equal(t, runtime.CheckWarn, res.Status)
		assert.Equal(t, "extension_check_failed", res.Code)
		res, err = r.Check().Run(ctxT(t), "adapt", true)
		require.NoError(t, err)
		assert.Equal(t, "extension_check_invalid", res.Code)
	})
}

func TestAdapterOperations(t *testing.T) {
	adapterConns(t, func(t *testing.T, conn host.Conn) {
		ops := host.NewRemote(conn).Operations()
		require.Len(t, ops, 3)
		auth := runtime.Authority{ScopeID: "s1", WorkID: "w", ExecutionID: "x"}
		out, err := ops["adapt.do"].Operation.Handle(ctxT(t), runtime.Call{Operation: "adapt.do", RequestID: "r1", Authority: auth})
		require.NoError(t, err)
		assert.JSONEq(t, `{"request":"r1","scope":"s1"}`, string(out))
		assert.Equal(t, "adapt", ops["adapt.do"].Owner.Name)
		assert.NotNil(t, ops["adapt.wait"].Filter)
		_, ok := ops["adapt.wait"].Operation.(runtime.WaitOperation)
		assert.True(t, ok)

		emit, ok := ops["adapt.emit"].Operation.(runtime.EmitOperation)
		require.True(t, ok)
		plan, err := emit.PlanEmit(ctxT(t), runtime.Call{Operation: "adapt.emit", RequestID: "r2", Authority: auth, Input: json.RawMessage(`{"x":1}`)})
		require.NoError(t, err)
		require.Len(t, plan.Emissions, 1)
		assert.Equal(t, "s1", plan.Emissions[0].ScopeID)
		require.NotNil(t, plan.Commit)
		ev := event("evt_1", "note", "adapt.note.v1")
		ev.Sequence = 7
		batch, err := plan.Commit.Commit([]runtime.EmissionOutcome{{Event: ev, Added: true}})
		require.NoError(t, err)
		require.Len(t, batch.Puts, 1)
		assert.Equal(t, "by-event/evt_1", batch.Puts[0].Key)
		assert.JSONEq(t, `{"seq":7}`, string(batch.Puts[0].Value))
	})
}

func TestAdapterIngressChecksWhatTheExtensionReturns(t *testing.T) {
	adapterConns(t, func(t *testing.T, conn host.Conn) {
		src := host.NewRemote(conn).Ingress(protocol.SourceDecl{Name: "adapt/in", ScopeID: "s1", Families: []string{"adapt.note"}}, "adapt", "e1")
		envs, err := src.Push(ctxT(t), runtime.Delivery{ID: "d1", Body: []byte("adapt.note")})
		require.NoError(t, err)
		require.Len(t, envs, 1)
		assert.Equal(t, "adapt/in", envs[0].Source)
		assert.Equal(t, "s1", envs[0].ScopeID)
		_, err = src.Push(ctxT(t), runtime.Delivery{ID: "d2", Body: []byte("other.family")})
		assert.ErrorIs(t, err, runtime.ErrUnauthorized)
	})
}

// TestAdapterIngressNamesOnlyWorkItMaySee: a pushed Event naming (works)
// a Work of another scope and kind is refused exactly as one naming a Work
// that does not exist; a Work of the extension's own kind may be named.
func TestAdapterIngressNamesOnlyWorkItMaySee(t *testing.T) {
	extensionBothWays(t, "adapt", manifestJSON("adapt", "sdk", adaptProvides("adapt"), nil), adaptExtension,
		func(t *testing.T, conn host.Conn, fx *fixture) {
			require.NoError(t, fx.store.Transact(ctxT(t), func(tx runtime.Tx) error {
				for _, w := range []runtime.Work{{ID: "wk-other", ScopeID: "s2", Kind: "other", State: runtime.WorkPending},
					{ID: "wk-own-kind", ScopeID: "s2", Kind: "adapt", State: runtime.WorkPending}} {
					if _, err := tx.PutWork(w); err != nil {
						return err
					}
				}
				return nil
			}))
			src := host.NewRemote(conn).Ingress(protocol.SourceDecl{Name: "adapt/in", ScopeID: "s1", Families: []string{"adapt.note"}}, "adapt", "e1")
			push := func(works string) error {
				_, err := src.Push(ctxT(t), runtime.Delivery{ID: "d-" + works, Body: []byte("adapt.note"),
					Headers: map[string][]string{"works": {works}}})
				return err
			}
			foreign, missing := push("wk-other"), push("wk-missing")
			require.ErrorIs(t, foreign, runtime.ErrNotFound)
			require.ErrorIs(t, missing, runtime.ErrNotFound)
			assert.Equal(t, strings.ReplaceAll(missing.Error(), "wk-missing", "ID"), strings.ReplaceAll(foreign.Error(), "wk-other", "ID"))
			assert.NoError(t, push("wk-own-kind"))
		})
}
