package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// keySource's delivery body is a JSON list of keys: one root envelope per
// key, which keyRoute matches and correlates by that key.
type keySource struct{}

func (keySource) Push(_ context.Context, d runtime.Delivery) ([]runtime.Envelope, error) {
	var keys []string
	if err := json.Unmarshal(d.Body, &keys); err != nil {
		return nil, err
	}
	var out []runtime.Envelope
	for i, k := range keys {
		b, _ := json.Marshal(map[string]string{"key": k})
		out = append(out, runtime.Envelope{DeliveryID: fmt.Sprint(d.ID, "/", i), Family: "test.item", Payload: b})
	}
	return out, nil
}

func (keySource) Reconcile(context.Context, runtime.ReconcileRequest) (runtime.ReconcilePage, error) {
	return runtime.ReconcilePage{Complete: true}, nil
}

type keyRoute struct{}

func (keyRoute) Match(_ context.Context, in runtime.RouteInput) (runtime.RouteDecision, error) {
	var p struct{ Key string }
	if err := json.Unmarshal(in.Event.Payload, &p); err != nil {
		return runtime.RouteDecision{}, err
	}
	return runtime.RouteDecision{Match: true, CorrelationKeys: []string{p.Key}}, nil
}

// measureIngress is what one bare acceptance (Engine.Accept of a root
// envelope) and one push routed to new Work (Engine.Push, then the
// routing pass, which finds nothing left) cost the store, each on a
// warm store of its own (statements prepared, tables past their first
// page): the two sides of BenchmarkEngineRatios's ingress_x.
func measureIngress(t *testing.T) (accept, push sqlite.WriteCost) {
	t.Helper()
	ctx := t.Context()
	newEngine := func(cfg runtime.Config) (*sqlite.Store, *runtime.Engine) {
		s := openStore(t, t.TempDir())
		cfg.Store = s
		cfg.OnError = func(err error) { t.Error(err) }
		e, err := runtime.New(cfg)
		require.NoError(t, err)
		t.Cleanup(e.Close)
		return s, e
	}
	as, ae := newEngine(runtime.Config{})
	ps, pe := newEngine(runtime.Config{
		Sources:  map[string]runtime.Source{"up": {ScopeID: "s1", Ingress: keySource{}}},
		Handlers: map[string]runtime.RouteHandler{"keyed": keyRoute{}},
		Routes:   map[string][]runtime.Route{"s1": {{Handler: "keyed", Kind: "task", Binding: "b"}}},
	})
	acceptOne := func(i int) error {
		_, err := ae.Accept(ctx, runtime.Envelope{Source: "src", DeliveryID: fmt.Sprint(i), ScopeID: "s1",
			Family: "test.item", Payload: json.RawMessage(fmt.Sprintf(`{"key":"k%d"}`, i))})
		return err
	}
	pushOne := func(i int) error {
		if _, err := pe.Push(ctx, "up", runtime.Delivery{ID: fmt.Sprint(i), Body: []byte(fmt.Sprintf(`["k%d"]`, i))}); err != nil {
			return err
		}
		n, err := pe.RoutePending(ctx)
		if err == nil && n != 0 {
			err = fmt.Errorf("the pass after push %d routed %d Events: the push was not routed in its commit", i, n)
		}
		return err
	}
	const warm = 20
	for i := range warm {
		require.NoError(t, acceptOne(i))
		require.NoError(t, pushOne(i))
	}
	var err error
	accept, err = sqlite.MeasureWrites(ctx, as, func() error { return acceptOne(warm) })
	require.NoError(t, err)
	push, err = sqlite.MeasureWrites(ctx, ps, func() error { return pushOne(warm) })
	require.NoError(t, err)
	cursor, err := pe.RoutingCursor(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(warm+1), cursor, "every pushed Event routed")
	return accept, push
}

func TestIngressCost(t *testing.T) {
	accept, push := measureIngress(t)
	t.Logf("accept: %d statements, %d frames:\n%s", len(accept.Statements), accept.Frames, strings.Join(accept.Statements, "\n"))
	t.Logf("push:   %d statements, %d frames:\n%s", len(push.Statements), push.Frames, strings.Join(push.Statements, "\n"))
	assert.NotZero(t, accept.Frames)
	// What the push's one commit runs beyond the bare acceptance's three:
	// the open Work on the key, the Work, its key, the Event's link and
	// the route record with the cursor in one statement (the Event's and
	// the Work's changes share the acceptance's); the pass after it runs
	// none. No Wait is active, which the store knows, so the Waits on the
	// key are not looked up. (It was 18: the log's end read twice, the
	// cursor three times, the Work and the Event re-read, the two KV
	// puts and the two changes apart; then 9, with the Waits' lookup.)
	assert.LessOrEqual(t, len(push.Statements), 8)
	// The b-trees it writes beyond the acceptance's: the Work's (which
	// records the Event as its origin) and its indexes by scope and state,
	// its key's, and KV's (the end of the routing namespace): a page each.
	// (It was 8 to 9 pages: the Work's rowid table and key index, and a
	// route record at a random place in the KV b-tree; then 7, with
	// work_keys_by_work and the Event's link in event_works.)
	assert.Equal(t, []string{"kv", "work_keys", "works", "works_by_scope", "works_by_state"},
		slices.DeleteFunc(slices.Clone(push.Btrees), func(b string) bool { return slices.Contains(accept.Btrees, b) }),
		"b-trees the push writes beyond the acceptance's %v", accept.Btrees)
	assert.LessOrEqual(t, push.Frames-accept.Frames, 5)
}

// A Work's creation is one INSERT whose key is the existence check: a
// creation over an existing Work is refused as a conflict naming its
// revision, and changes nothing of it (row, keys, change log), even when
// the transaction goes on to commit.
func TestCreatingAnExistingWorkChangesNothing(t *testing.T) {
	ctx := t.Context()
	s := openStore(t, t.TempDir())
	put := func(w runtime.Work) (runtime.Work, error) {
		err := s.Transact(ctx, func(tx runtime.Tx) error {
			var err error
			w, err = tx.PutWork(w)
			return err
		})
		return w, err
	}
	w, err := put(runtime.Work{ID: "w", ScopeID: "s1", Kind: "task", State: runtime.WorkPending, CorrelationKeys: []string{"a"}})
	require.NoError(t, err)
	w, err = put(w) // revision 2
	require.NoError(t, err)
	var latest int64
	var refused error
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		var err error
		if latest, err = tx.LatestChange(); err != nil {
			return err
		}
		_, refused = tx.PutWork(runtime.Work{ID: "w", ScopeID: "s2", Kind: "other", State: runtime.WorkDone, CorrelationKeys: []string{"b"}})
		return nil // commit whatever the refused write left
	}))
	require.ErrorIs(t, refused, runtime.ErrConflict)
	assert.ErrorContains(t, refused, "revision 2")
	require.NoError(t, s.View(ctx, func(r runtime.ReadTx) error {
		got, err := r.Work("w")
		require.NoError(t, err)
		assert.Equal(t, w, got)
		for key, want := range map[string]int{"a": 1, "b": 0} {
			ws, err := r.Works(runtime.WorkFilter{CorrelationKey: key})
			require.NoError(t, err)
			assert.Len(t, ws, want, "Work holding key %q", key)
		}
		after, err := r.LatestChange()
		assert.Equal(t, latest, after, "no change logged")
		return err
	}))
}

// A KV batch's puts are written kvPutsPerStatement to a statement, each
// entry as a put of its own would write it.
func TestKVCommitWritesPutsInFewStatements(t *testing.T) {
	ctx := t.Context()
	s := openStore(t, t.TempDir())
	const n = 40 // three statements: 16, 16, 8
	commit := func(round int) error {
		b := runtime.KVBatch{Deletes: []runtime.KVKey{{Namespace: "other", Key: "gone"}}}
		for i := range n {
			b.Puts = append(b.Puts, runtime.KVPut{Namespace: "ns", Key: fmt.Sprint("k", i), Value: []byte(fmt.Sprint(round, "/", i))})
		}
		b.Puts[n-1].Value = nil // an empty value is stored as empty, not absent
		return s.Transact(ctx, func(tx runtime.Tx) error { return tx.KVCommit(b) })
	}
	require.NoError(t, commit(0))
	cost, err := sqlite.MeasureWrites(ctx, s, func() error { return commit(1) }) // every entry replaced
	require.NoError(t, err)
	assert.Len(t, cost.Statements, 4, "three statements of puts and the delete:\n%s", strings.Join(cost.Statements, "\n"))
	require.NoError(t, s.View(ctx, func(r runtime.ReadTx) error {
		entries, err := r.KVList("ns", "", "", runtime.MaxPageLimit)
		require.NoError(t, err)
		require.Len(t, entries, n)
		for _, e := range entries {
			var i int
			_, err := fmt.Sscanf(e.Key, "k%d", &i)
			require.NoError(t, err)
			want := []byte(fmt.Sprint(1, "/", i))
			if i == n-1 {
				want = []byte{}
			}
			assert.Equal(t, want, e.Value, e.Key)
			assert.Equal(t, runtime.KVVersion(want), e.Version, e.Key)
		}
		return nil
	}))
}
