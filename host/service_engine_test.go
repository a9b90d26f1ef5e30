package host_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/runtimetest"
)

// engineCase is "mine" in scope s1 with its service emitting through a
// runtime engine under limits, as the daemon composes it.
type engineCase struct {
	store  runtime.Store
	engine *runtime.Engine
	mine   host.Caller
}

func newEngineCase(t *testing.T, wire bool, limits runtime.CausalLimits) *engineCase {
	f := newFixture(t)
	engine, err := runtime.New(runtime.Config{Store: f.store, Clock: runtimetest.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)), Causal: limits})
	require.NoError(t, err)
	t.Cleanup(engine.Close)
	require.NoError(t, f.store.Transact(ctxT(t), func(tx runtime.Tx) error {
		_, err := tx.PutScope(runtime.Scope{ID: "s1"})
		return err
	}))
	c := &engineCase{store: f.store, engine: engine}
	manifest := manifestJSON("mine", "good", provideAll("mine"), nil)
	if !wire {
		m, err := protocol.ParseManifest(manifest)
		require.NoError(t, err)
		svc := host.NewService(host.ServiceConfig{Manifest: m, Store: f.store, Engine: engine})
		require.NoError(t, svc.Configure(configureFor("mine", "s1"), protocol.ConfigureResult{}))
		c.mine = svc
		return c
	}
	p, _ := f.process("mine", manifest, func(cfg *host.Config) {
		cfg.Service = host.NewService(host.ServiceConfig{Manifest: cfg.Package.Manifest, Store: f.store, Engine: engine})
		cfg.Configure = func() protocol.ConfigureParams { return configureFor("mine", "s1") }
	})
	require.NoError(t, p.Start(ctxT(t)))
	c.mine = relay{p}
	return c
}

// root emits a root Event of mine's family in s1 through kv.commit.
func (c *engineCase) root(t *testing.T) string {
	var r protocol.KVCommitResult
	require.NoError(t, c.mine.Call(ctxT(t), "kv.commit", protocol.KVCommitParams{Emissions: []protocol.Emission{{
		Source: "mine/in", DeliveryID: "root", ScopeID: "s1", Family: "mine.note", Type: "note",
		Payload: json.RawMessage(`{}`)}}}, &r))
	require.Len(t, r.Accepted, 1)
	require.NotNil(t, r.Accepted[0].Event)
	return r.Accepted[0].Event.ID
}

// derive calls event.accept for a child of parent, with a KV put that
// must commit only with a newly accepted Event.
func (c *engineCase) derive(t *testing.T, parent, delivery string) (protocol.EventAcceptResult, error) {
	var r protocol.EventAcceptResult
	err := c.mine.Call(ctxT(t), "event.accept", protocol.EventAcceptParams{Source: "mine/in", DeliveryID: delivery,
		Family: "mine.note", Type: "note", Payload: json.RawMessage(`{}`), Parent: parent,
		Puts: []protocol.KVPut{{Namespace: "mine", Key: delivery, Value: json.RawMessage(`1`)}}}, &r)
	return r, err
}

func bothWaysEngine(t *testing.T, limits runtime.CausalLimits, f func(t *testing.T, c *engineCase)) {
	t.Run("in_process", func(t *testing.T) { f(t, newEngineCase(t, false, limits)) })
	t.Run("over_the_wire", func(t *testing.T) { f(t, newEngineCase(t, true, limits)) })
}

// TestFaultEventAcceptPerMinuteLimit: a hostile extension that derives
// from one root with event.accept, as fast as it can, meets the engine's
// per-minute limit of the chain exactly as kv.commit emissions do (the
// spec: "Causal depth and per-minute limits are the runtime's"), is
// refused causal_limit, and the refusal is recorded for the operator with
// none of the refused call's KV writes.
func TestFaultEventAcceptPerMinuteLimit(t *testing.T) {
	bothWaysEngine(t, runtime.CausalLimits{PerMinute: 3}, func(t *testing.T, c *engineCase) {
		root := c.root(t) // the chain's first Event this minute
		for i := 1; i <= 2; i++ {
			r, err := c.derive(t, root, fmt.Sprintf("d%d", i))
			require.NoError(t, err, "child %d is within the limit", i)
			assert.True(t, r.Added)
		}
		_, err := c.derive(t, root, "d3")
		require.ErrorIs(t, err, protocol.ErrCausalLimit, "the chain's fourth Event this minute")
		assert.False(t, accepted(t, c.store, "mine/in", "d3"))
		assert.Empty(t, kvEntriesWith(t, c.store, "mine", "d3"), "the refused call's put")
		assert.Len(t, kvEntriesWith(t, c.store, "mine", "d1"), 1, "an accepted call's put")
		refusals, err := c.engine.Refusals(ctxT(t))
		require.NoError(t, err)
		require.Len(t, refusals, 1)
		assert.Equal(t, "d3", refusals[0].DeliveryID)

		// A replay of an accepted child is the same Event, not counted
		// again and not refused, and its put is not applied twice.
		r, err := c.derive(t, root, "d1")
		require.NoError(t, err)
		assert.False(t, r.Added)
	})
}

// TestFaultEventAcceptDepthIsTheEngines: the depth bound event.accept
// applies is the engine's, not the service's own default, so an operator's
// lower bound holds for derived Events too.
func TestFaultEventAcceptDepthIsTheEngines(t *testing.T) {
	bothWaysEngine(t, runtime.CausalLimits{MaxDepth: 2}, func(t *testing.T, c *engineCase) {
		parent := c.root(t)
		for depth := 1; depth <= 2; depth++ {
			r, err := c.derive(t, parent, fmt.Sprintf("depth%d", depth))
			require.NoError(t, err, "depth %d is within the bound", depth)
			parent = r.Event.ID
		}
		_, err := c.derive(t, parent, "depth3")
		require.ErrorIs(t, err, protocol.ErrCausalLimit)
		assert.False(t, accepted(t, c.store, "mine/in", "depth3"))
	})
}
