package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// secrets is a resolver that knows every connection's values.
type secrets map[string]map[string]string

func (s secrets) ResolveSecrets(_ context.Context, conn string, names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		v, ok := s[conn][n]
		if !ok {
			return nil, errors.New("no secret " + n + " (ref file:/etc/" + conn + ")")
		}
		out[n] = v
	}
	return out, nil
}

// serviceCase is one pair of extensions with their services: "mine" in
// scope s1 and "theirs" in scope s2, over one store.
type serviceCase struct {
	store        runtime.Store
	mine, theirs host.Caller
	log          *strings.Builder
	foreignWork  string
	foreignEvent string
	ownKindWork  string
}

func provideAll(name string) map[string]any {
	p := notesProvides(name)
	p["operations"] = []any{map[string]any{"name": name + ".wait", "kind": "wait"}}
	return p
}

func configureFor(name, scope string) protocol.ConfigureParams {
	return protocol.ConfigureParams{
		Entries: []protocol.ConfigEntry{{ScopeID: scope, ID: "e1", Type: name, Connection: name + "-conn",
			Config: json.RawMessage(`{"source":"` + name + `/in","families":["` + name + `.note"]}`)}},
		Connections: []protocol.Connection{
			{Name: name + "-conn", Type: name + "-account", SecretNames: []string{"token"}},
			{Name: "stranger", Type: "other-account", SecretNames: []string{"token"}},
		},
	}
}

// seed stores the other extension's Work and Event in s2, and a Work of
// mine's own kind there too.
func seed(t *testing.T, st runtime.Store) (foreignWork, foreignEvent, ownKindWork string) {
	require.NoError(t, st.Transact(ctxT(t), func(tx runtime.Tx) error {
		for _, id := range []string{"s1", "s2"} {
			if _, err := tx.PutScope(runtime.Scope{ID: id, Config: json.RawMessage(`{"secret_refs":{"token":"file:/x"},"a":1}`)}); err != nil {
				return err
			}
		}
		w, err := tx.PutWork(runtime.Work{ID: "w-theirs", ScopeID: "s2", Kind: "theirs", State: runtime.WorkPending})
		if err != nil {
			return err
		}
		foreignWork = w.ID
		w, err = tx.PutWork(runtime.Work{ID: "w-mine-kind", ScopeID: "s2", Kind: "mine", State: runtime.WorkPending})
		if err != nil {
			return err
		}
		ownKindWork = w.ID
		if _, err := tx.PutWait(runtime.Wait{ID: "wait-1", WorkID: w.ID, Keys: []string{"k"}, Owner: "mine", State: runtime.WaitActive}); err != nil {
			return err
		}
		ev, _, err := tx.AcceptEvent(runtime.Envelope{Source: "theirs/in", DeliveryID: "x", ScopeID: "s2", Family: "theirs.note"})
		foreignEvent = ev.ID
		return err
	}))
	return
}

// newServiceCase builds the pair; wire runs "mine" as a real process and
// reaches the host through it.
func newServiceCase(t *testing.T, wire bool) *serviceCase {
	f := newFixture(t)
	c := &serviceCase{store: f.store, log: &strings.Builder{}}
	c.foreignWork, c.foreignEvent, c.ownKindWork = seed(t, f.store)
	sec := secrets{"mine-conn": {"token": "s3cr3t"}, "stranger": {"token": "not-yours"}}
	theirsM, err := protocol.ParseManifest(manifestJSON("theirs", "good", provideAll("theirs"), nil))
	require.NoError(t, err)
	theirs := host.NewService(host.ServiceConfig{Manifest: theirsM, Store: f.store, Secrets: sec})
	require.NoError(t, theirs.Configure(configureFor("theirs", "s2"), protocol.ConfigureResult{}))
	require.NoError(t, theirs.Call(ctxT(t), "kv.commit", protocol.KVCommitParams{Puts: []protocol.KVPut{
		{Namespace: "theirs", Key: "token", Value: json.RawMessage(`"private"`)}}}, nil))
	c.theirs = theirs

	if !wire {
		m, err := protocol.ParseManifest(manifestJSON("mine", "good", provideAll("mine"), nil))
		require.NoError(t, err)
		svc := host.NewService(host.ServiceConfig{Manifest: m, Store: f.store, Secrets: sec,
			Logf: func(format string, args ...any) { c.log.WriteString(sprintf(format, args...) + "\n") }})
		res := protocol.ConfigureResult{Sources: []protocol.SourceDecl{{Name: "mine/in", ScopeID: "s1", Families: []string{"mine.note"}}}}
		require.NoError(t, svc.Configure(configureFor("mine", "s1"), res))
		c.mine = svc
		return c
	}
	p, svc := f.process("mine", manifestJSON("mine", "good", provideAll("mine"), nil), func(cfg *host.Config) {
		m := cfg.Package.Manifest
		cfg.Service = host.NewService(host.ServiceConfig{Manifest: m, Store: f.store, Secrets: sec,
			Logf: func(format string, args ...any) { c.log.WriteString(sprintf(format, args...) + "\n") }})
		cfg.Configure = func() protocol.ConfigureParams { return configureFor("mine", "s1") }
	})
	_ = svc
	require.NoError(t, p.Start(ctxT(t)))
	c.mine = relay{p}
	return c
}

func sprintf(format string, args ...any) string {
	return strings.TrimSpace(strings.ReplaceAll(fmtSprintf(format, args...), "\n", " "))
}

func bothWays(t *testing.T, f func(t *testing.T, c *serviceCase)) {
	t.Run("in_process", func(t *testing.T) { f(t, newServiceCase(t, false)) })
	t.Run("over_the_wire", func(t *testing.T) { f(t, newServiceCase(t, true)) })
}

// TestFaultHostileKVRead: an extension asking for another's KV namespace
// (or the host's reserved one) is refused unauthorized, learns nothing,
// and the refusal is logged.
func TestFaultHostileKVRead(t *testing.T) {
	bothWays(t, func(t *testing.T, c *serviceCase) {
		var r protocol.KVGetResult
		err := c.mine.Call(ctxT(t), "kv.get", protocol.KVGetParams{Namespace: "theirs", Key: "token"}, &r)
		require.ErrorIs(t, err, protocol.ErrUnauthorized)
		assert.False(t, r.Found)
		assert.NotContains(t, err.Error(), "private")
		err = c.mine.Call(ctxT(t), "kv.get", protocol.KVGetParams{Namespace: host.KVLayoutNamespace, Key: "mine"}, &r)
		require.ErrorIs(t, err, protocol.ErrUnauthorized)
		err = c.mine.Call(ctxT(t), "kv.list", protocol.KVListParams{Namespace: "theirs"}, nil)
		require.ErrorIs(t, err, protocol.ErrUnauthorized)
		assert.Contains(t, c.log.String(), `refused kv.get`)
	})
}

// TestFaultForeignScopes: reads outside the extension's scopes answer
// exactly as for a record that does not exist (not_found, or an empty
// page), so they are no existence oracle; Work of its own kind is visible
// anywhere; scope reads drop secret references.
func TestFaultForeignScopes(t *testing.T) {
	bothWays(t, func(t *testing.T, c *serviceCase) {
		ctx := ctxT(t)
		errForeign := c.mine.Call(ctx, "state.work", protocol.IDParams{ID: c.foreignWork}, nil)
		errMissing := c.mine.Call(ctx, "state.work", protocol.IDParams{ID: "no-such-work"}, nil)
		require.ErrorIs(t, errForeign, protocol.ErrNotFound)
		require.ErrorIs(t, errMissing, protocol.ErrNotFound)
		assert.Equal(t, strings.ReplaceAll(errMissing.Error(), "no-such-work", "X"), strings.ReplaceAll(errForeign.Error(), c.foreignWork, "X"))
		assert.ErrorIs(t, c.mine.Call(ctx, "state.event", protocol.IDParams{ID: c.foreignEvent}, nil), protocol.ErrNotFound)
		assert.ErrorIs(t, c.mine.Call(ctx, "state.scope", protocol.IDParams{ID: "s2"}, nil), protocol.ErrNotFound)
		assert.ErrorIs(t, c.mine.Call(ctx, "state.executions", protocol.WorkIDParams{WorkID: c.foreignWork}, nil), protocol.ErrNotFound)
		var evs protocol.EventsResult
		require.NoError(t, c.mine.Call(ctx, "state.events", protocol.EventsParams{ScopeID: "s2"}, &evs))
		assert.Empty(t, evs.Events)
		require.NoError(t, c.mine.Call(ctx, "state.events", protocol.EventsParams{}, &evs))
		assert.Empty(t, evs.Events)
		require.NoError(t, c.mine.Call(ctx, "state.work_events", protocol.WorkEventsParams{ID: c.foreignWork}, &evs))
		assert.Empty(t, evs.Events)
		var works protocol.WorksResult
		require.NoError(t, c.mine.Call(ctx, "state.works", protocol.WorksParams{}, &works))
		require.Len(t, works.Works, 1)
		assert.Equal(t, c.ownKindWork, works.Works[0].ID)
		var w protocol.WorkResult
		require.NoError(t, c.mine.Call(ctx, "state.work", protocol.IDParams{ID: c.ownKindWork}, &w))
		var sc protocol.ScopeResult
		require.NoError(t, c.mine.Call(ctx, "state.scope", protocol.IDParams{ID: "s1"}, &sc))
		assert.NotContains(t, string(sc.Scope.Config), "secret_refs")
		assert.NotContains(t, string(sc.Scope.Config), "file:/x")
		var scs protocol.ScopesResult
		require.NoError(t, c.mine.Call(ctx, "state.scopes", protocol.Empty{}, &scs))
		require.Len(t, scs.Scopes, 1)
		assert.Contains(t, c.log.String(), "outside its scopes")
	})
}

// TestFaultUnboundSecrets: secret.resolve gives the values of a connection
// bound to the extension's entry, and refuses a connection it is not
// bound to, another type's connection and a secret the connection lacks.
func TestFaultUnboundSecrets(t *testing.T) {
	bothWays(t, func(t *testing.T, c *serviceCase) {
		ctx := ctxT(t)
		var r protocol.SecretResolveResult
		require.NoError(t, c.mine.Call(ctx, "secret.resolve", protocol.SecretResolveParams{Connection: "mine-conn", ScopeID: "s1"}, &r))
		assert.Equal(t, map[string]string{"token": "s3cr3t"}, r.Values)
		for _, p := range []protocol.SecretResolveParams{
			{Connection: "stranger", ScopeID: "s1"},
			{Connection: "theirs-conn"},
			{Connection: "mine-conn", ScopeID: "s2"},
			{Connection: "mine-conn", ScopeID: "s1", Names: []string{"password"}},
		} {
			err := c.mine.Call(ctx, "secret.resolve", p, nil)
			assert.ErrorIs(t, err, protocol.ErrUnauthorized, "%+v", p)
			if err != nil {
				assert.NotContains(t, err.Error(), "not-yours")
			}
		}
		assert.Contains(t, c.log.String(), "refused secret.resolve")
	})
}

// TestFaultUndeclaredMethods: a method the manifest does not enable is
// undeclared (a surface it lacks, a permission it lacks); a host-to-
// extension method sent to the host, or an unknown one, is
// method_not_found. Each is logged.
func TestFaultUndeclaredMethods(t *testing.T) {
	bothWays(t, func(t *testing.T, c *serviceCase) {
		ctx := ctxT(t)
		for _, tc := range []struct {
			method string
			params any
			want   error
		}{
			{"artifact.create", protocol.ArtifactCreateParams{RunID: "r", Name: "n"}, protocol.ErrUndeclared},
			{"probe.list", protocol.Empty{}, protocol.ErrUndeclared},
			{"telemetry.capture", protocol.Empty{}, protocol.ErrUndeclared},
			{"route.match", protocol.Empty{}, protocol.ErrMethodNotFound},
			{"initialize", protocol.Empty{}, protocol.ErrMethodNotFound},
			{"no.such.method", protocol.Empty{}, protocol.ErrMethodNotFound},
		} {
			assert.ErrorIs(t, c.mine.Call(ctx, tc.method, tc.params, nil), tc.want, tc.method)
		}
		log := c.log.String()
		assert.Contains(t, log, "refused artifact.create")
		assert.Contains(t, log, "refused route.match")
	})
}

func TestServiceTimersWorkCancelAndIngress(t *testing.T) {
	bothWays(t, func(t *testing.T, c *serviceCase) {
		ctx := ctxT(t)
		var armed protocol.TimerArmResult
		require.NoError(t, c.mine.Call(ctx, "timer.arm", protocol.TimerArmParams{Key: "k", Recurrence: "mine-tick", ScopeID: "s1",
			Due: farDue}, &armed))
		assert.Equal(t, "k", armed.Timer.Key)
		assert.ErrorIs(t, c.mine.Call(ctx, "timer.arm", protocol.TimerArmParams{Key: "k", Recurrence: "mine-tick", ScopeID: "s2", Due: farDue}, nil), protocol.ErrUnauthorized)
		assert.ErrorIs(t, c.mine.Call(ctx, "timer.arm", protocol.TimerArmParams{Key: "k", Recurrence: "other", ScopeID: "s1", Due: farDue}, nil), protocol.ErrUndeclared)
		var timers protocol.TimersResult
		require.NoError(t, c.mine.Call(ctx, "state.timers", protocol.TimersParams{}, &timers))
		require.Len(t, timers.Timers, 1)
		var cancelled protocol.TimerCancelResult
		require.NoError(t, c.mine.Call(ctx, "timer.cancel", protocol.TimerCancelParams{Key: "k"}, &cancelled))
		assert.True(t, cancelled.Cancelled)

		require.NoError(t, c.mine.Call(ctx, "wait.progress", protocol.WaitProgressParams{WorkID: c.ownKindWork, Progress: "half way\nsecond line"}, nil))
		require.NoError(t, c.store.View(ctx, func(tx runtime.ReadTx) error {
			w, err := tx.ActiveWait(c.ownKindWork)
			assert.Equal(t, "half way", w.Progress)
			return err
		}))
		assert.ErrorIs(t, c.mine.Call(ctx, "wait.progress", protocol.WaitProgressParams{WorkID: c.foreignWork, Progress: "x"}, nil), protocol.ErrNotFound)

		assert.ErrorIs(t, c.mine.Call(ctx, "work.cancel", protocol.WorkCancelParams{WorkID: c.foreignWork}, nil), protocol.ErrNotFound)
		var wc protocol.WorkCancelResult
		require.NoError(t, c.mine.Call(ctx, "work.cancel", protocol.WorkCancelParams{WorkID: c.ownKindWork}, &wc))
		assert.True(t, wc.Cancelled)

		var d protocol.IngressDeliverResult
		require.NoError(t, c.mine.Call(ctx, "ingress.deliver", protocol.IngressDeliverParams{Source: "mine/in",
			Events: []protocol.EventDraft{{DeliveryID: "d1", Family: "mine.note", Schema: "mine.note.v1", Payload: json.RawMessage(`{}`)}}}, &d))
		require.Len(t, d.Accepted, 1)
		assert.Equal(t, "s1", d.Accepted[0].Event.ScopeID)
		assert.ErrorIs(t, c.mine.Call(ctx, "ingress.deliver", protocol.IngressDeliverParams{Source: "mine/other",
			Events: []protocol.EventDraft{{DeliveryID: "d2", Family: "mine.note"}}}, nil), protocol.ErrUnauthorized)
	})
}

func TestServiceWithoutStoreRefusesStateMethods(t *testing.T) {
	m, err := protocol.ParseManifest(manifestJSON("mine", "good", nil, nil))
	require.NoError(t, err)
	svc := host.NewService(host.ServiceConfig{Manifest: m})
	assert.ErrorIs(t, svc.Call(ctxT(t), "kv.get", protocol.KVGetParams{Namespace: "mine", Key: "k"}, nil), protocol.ErrUnsupported)
}

// TestRuntimeErrorsMapOntoProtocolCodes walks the one mapping table: each
// runtime sentinel, wrapped, reaches the extension as its protocol code.
func TestRuntimeErrorsMapOntoProtocolCodes(t *testing.T) {
	for _, row := range host.RuntimeErrorTable() {
		from, to := row[0], row[1]
		got := host.WireError(errors.Join(errors.New("context"), from))
		assert.ErrorIs(t, got, to, "%v", from)
		var pe *protocol.Error
		require.ErrorAs(t, got, &pe)
		// And back, for what an extension answers the engine: the first
		// runtime sentinel of the same protocol code.
		back := host.ProtocolToRuntime(to)
		assert.Error(t, back)
		if from != context.DeadlineExceeded && from != runtime.ErrTooLarge {
			assert.ErrorIs(t, back, from, "%v", to)
		}
	}
	assert.ErrorIs(t, host.WireError(errors.New("boom with detail")), protocol.ErrInternal)
	assert.NotContains(t, host.WireError(errors.New("boom with detail")).Error(), "detail")
	assert.ErrorIs(t, host.WireError(protocol.ErrKVDowngrade), protocol.ErrKVDowngrade)
}

// TestServedMethodsAreExtensionToHost: every method the service serves is
// in the catalogue as an extension-to-host method.
func TestServedMethodsAreExtensionToHost(t *testing.T) {
	for _, name := range host.ServedMethods() {
		m, ok := protocol.LookupMethod(name)
		if assert.True(t, ok, name) {
			assert.Equal(t, protocol.ExtensionToHost, m.Direction, name)
		}
	}
}

// TestFaultForeignWorkInWorks: an Event of the extension's own scope that
// names (works) a Work it may not see, one of another scope and kind, is
// refused on every path that accepts a draft (kv.commit emissions,
// event.accept, ingress.deliver) with exactly the answer a Work that does
// not exist gets, and nothing of the call applies. A Work it may see (one
// of its scopes, or of its own kind anywhere, as state.work) may be named.
func TestFaultForeignWorkInWorks(t *testing.T) {
	bothWays(t, func(t *testing.T, c *serviceCase) {
		ctx := ctxT(t)
		require.NoError(t, c.store.Transact(ctx, func(tx runtime.Tx) error {
			_, err := tx.PutWork(runtime.Work{ID: "w-in-s1", ScopeID: "s1", Kind: "theirs", State: runtime.WorkPending})
			return err
		}))
		var root protocol.KVCommitResult
		require.NoError(t, c.mine.Call(ctx, "kv.commit", protocol.KVCommitParams{Emissions: []protocol.Emission{{
			Source: "mine/in", DeliveryID: "root", ScopeID: "s1", Family: "mine.note", Schema: "mine.note.v1",
			Payload: json.RawMessage(`{}`)}}}, &root))
		require.Len(t, root.Accepted, 1)
		require.NotNil(t, root.Accepted[0].Event)
		parent := root.Accepted[0].Event.ID

		paths := map[string]func(delivery string, works []string) error{
			"kv.commit": func(delivery string, works []string) error {
				return c.mine.Call(ctx, "kv.commit", protocol.KVCommitParams{
					Puts: []protocol.KVPut{{Namespace: "mine", Key: delivery, Value: json.RawMessage(`1`)}},
					Emissions: []protocol.Emission{{Source: "mine/in", DeliveryID: delivery, ScopeID: "s1", Family: "mine.note",
						Schema: "mine.note.v1", Payload: json.RawMessage(`{}`), Works: works}}}, nil)
			},
			"event.accept": func(delivery string, works []string) error {
				return c.mine.Call(ctx, "event.accept", protocol.EventAcceptParams{Source: "mine/in", DeliveryID: delivery,
					Family: "mine.note", Schema: "mine.note.v1", Payload: json.RawMessage(`{}`), Parent: parent, Works: works,
					Puts: []protocol.KVPut{{Namespace: "mine", Key: delivery, Value: json.RawMessage(`1`)}}}, nil)
			},
			"ingress.deliver": func(delivery string, works []string) error {
				return c.mine.Call(ctx, "ingress.deliver", protocol.IngressDeliverParams{Source: "mine/in",
					Events: []protocol.EventDraft{
						{DeliveryID: delivery + "-good", Family: "mine.note", Schema: "mine.note.v1", Payload: json.RawMessage(`{}`)},
						{DeliveryID: delivery, Family: "mine.note", Schema: "mine.note.v1", Payload: json.RawMessage(`{}`), Works: works}}}, nil)
			},
		}
		for method, call := range paths {
			answers := map[string]string{}
			for _, work := range []string{c.foreignWork, "w-nowhere"} {
				delivery := method + "-" + work
				err := call(delivery, []string{"w-in-s1", work})
				require.ErrorIs(t, err, protocol.ErrNotFound, "%s naming %s", method, work)
				answers[work] = strings.ReplaceAll(err.Error(), work, "ID")
				assert.Empty(t, kvEntriesWith(t, c.store, "mine", delivery), "%s naming %s applied its put", method, work)
				for _, d := range []string{delivery, delivery + "-good"} {
					assert.False(t, accepted(t, c.store, "mine/in", d), "%s naming %s accepted %s", method, work, d)
				}
			}
			assert.Equal(t, answers["w-nowhere"], answers[c.foreignWork], "%s: a foreign Work answers as a missing one", method)
			require.NoError(t, call(method+"-visible", []string{"w-in-s1", c.ownKindWork}), "%s naming Work it may see", method)
			assert.True(t, accepted(t, c.store, "mine/in", method+"-visible"))
		}
	})
}

// kvEntriesWith lists the keys of namespace ns equal to key.
func kvEntriesWith(t *testing.T, st runtime.Store, ns, key string) []string {
	var out []string
	for _, k := range kvEntries(t, st, ns) {
		if k == key {
			out = append(out, k)
		}
	}
	return out
}

// accepted reports whether the store holds the Event source/delivery.
func accepted(t *testing.T, st runtime.Store, source, delivery string) bool {
	t.Helper()
	found := false
	require.NoError(t, st.View(ctxT(t), func(tx runtime.ReadTx) error {
		_, err := tx.EventByDelivery(source, delivery)
		if errors.Is(err, runtime.ErrNotFound) {
			return nil
		}
		found = err == nil
		return err
	}))
	return found
}
