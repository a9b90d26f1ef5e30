package runtime_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

func routingHarness(t *testing.T, h *keyedHandler) *harness {
	return newHarness(t, runtime.Config{
		Handlers: map[string]runtime.RouteHandler{"keyed": h, "never": &keyedHandler{}},
		Routes: map[string][]runtime.Route{
			"s1": {{Handler: "keyed", Kind: "task", Binding: "b"}},
		},
	})
}

func accept(t *testing.T, h *harness, envs ...runtime.Envelope) []runtime.Event {
	t.Helper()
	evs, err := h.engine.Accept(context.Background(), envs...)
	require.NoError(t, err)
	return evs
}

func routeAll(t *testing.T, h *harness) {
	t.Helper()
	for {
		n, err := h.engine.RoutePending(context.Background())
		require.NoError(t, err)
		if n == 0 {
			return
		}
	}
}

func record(t *testing.T, h *harness, eventID string) runtime.RouteRecord {
	t.Helper()
	rec, err := h.engine.RouteRecordOf(context.Background(), eventID)
	require.NoError(t, err)
	return rec
}

func TestRoutingCreatesAttachesAndRecords(t *testing.T) {
	h := routingHarness(t, &keyedHandler{})
	evs := accept(t, h,
		testEnvelope("src", "1", "s1", payload{Match: true, Key: "k1", Context: json.RawMessage(`{"model":"m"}`), Grants: []string{"g2", "g1"},
			Display: &runtime.Display{Title: "First"}}),
		testEnvelope("src", "2", "s1", payload{Match: true, Key: "k1", Context: json.RawMessage(`{"model":"other"}`), Grants: []string{"g3"},
			Display: &runtime.Display{Title: "Renamed", Ref: "#1"}}),
		testEnvelope("src", "3", "s1", payload{Match: false}),
		testEnvelope("src", "4", "elsewhere", payload{Match: true}),
	)
	routeAll(t, h)

	ws := h.works(t)
	require.Len(t, ws, 1)
	w := ws[0]
	assert.Equal(t, "task", w.Kind)
	assert.Equal(t, "b", w.Binding)
	assert.Equal(t, runtime.WorkPending, w.State)
	assert.Equal(t, []string{"k1"}, w.CorrelationKeys)
	assert.JSONEq(t, `{"model":"m"}`, string(w.Context), "context applies on creation only")
	assert.Equal(t, []string{"g1", "g2"}, w.Grants, "grants apply on creation only")
	assert.JSONEq(t, `{"title":"Renamed","ref":"#1"}`, string(w.Display), "a later match's display replaces")

	assert.Equal(t, runtime.DispositionCreated, record(t, h, evs[0].ID).Disposition)
	rec := record(t, h, evs[1].ID)
	assert.Equal(t, runtime.DispositionAttached, rec.Disposition)
	assert.Equal(t, w.ID, rec.WorkID)
	assert.Equal(t, runtime.DispositionUnmatched, record(t, h, evs[2].ID).Disposition)
	other := record(t, h, evs[3].ID)
	assert.Equal(t, runtime.DispositionUnmatched, other.Disposition)
	assert.NotEmpty(t, other.Reason)

	var linked []runtime.Event
	h.view(t, func(r runtime.ReadTx) error {
		var err error
		linked, err = r.WorkEvents(w.ID, 0, 0)
		return err
	})
	require.Len(t, linked, 2)
	cursor, err := h.engine.RoutingCursor(context.Background())
	require.NoError(t, err)
	assert.Equal(t, evs[3].Sequence, cursor)
}

func TestRoutingHandlerErrorKeepsEventPending(t *testing.T) {
	h := routingHarness(t, &keyedHandler{})
	evs := accept(t, h, testEnvelope("src", "1", "s1", payload{Fail: true}))
	_, err := h.engine.RoutePending(context.Background())
	require.Error(t, err)
	cursor, err := h.engine.RoutingCursor(context.Background())
	require.NoError(t, err)
	assert.Zero(t, cursor)
	_, err = h.engine.RouteRecordOf(context.Background(), evs[0].ID)
	require.ErrorIs(t, err, runtime.ErrNotFound)
}

func TestDisplayLimits(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	link := func(label, url string) runtime.DisplayLink { return runtime.DisplayLink{Label: label, URL: url} }
	links := func(n int) []runtime.DisplayLink {
		var out []runtime.DisplayLink
		for range n {
			out = append(out, link("l", "https://example.com/"))
		}
		return out
	}
	cases := []struct {
		name    string
		display runtime.Display
		refused string // part of the reason; "" means kept
	}{
		{"valid", runtime.Display{Title: "T", Ref: "#1", Requester: "me", Links: links(8)}, ""},
		{"ref only", runtime.Display{Ref: "ENG-12"}, ""},
		{"title at limit", runtime.Display{Title: long(200)}, ""},
		{"title over", runtime.Display{Title: long(201)}, "title"},
		{"ref over", runtime.Display{Ref: long(41)}, "ref"},
		{"requester over", runtime.Display{Title: "t", Requester: long(101)}, "requester"},
		{"neither title nor ref", runtime.Display{Requester: "me"}, "title or a ref"},
		{"two lines", runtime.Display{Title: "a\nb"}, "one line"},
		{"control char", runtime.Display{Title: "a\x07b"}, "one line"},
		{"too many links", runtime.Display{Title: "t", Links: links(9)}, "links"},
		{"label missing", runtime.Display{Title: "t", Links: []runtime.DisplayLink{link("", "https://x.test/")}}, "label"},
		{"label over", runtime.Display{Title: "t", Links: []runtime.DisplayLink{link(long(61), "https://x.test/")}}, "label"},
		{"scheme", runtime.Display{Title: "t", Links: []runtime.DisplayLink{link("l", "javascript:alert(1)")}}, "http"},
		{"relative", runtime.Display{Title: "t", Links: []runtime.DisplayLink{link("l", "/path")}}, "http"},
		{"url over", runtime.Display{Title: "t", Links: []runtime.DisplayLink{link("l", "https://x.test/"+long(2048))}}, "url"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := routingHarness(t, &keyedHandler{})
			first := runtime.Display{Title: "Kept"}
			evs := accept(t, h,
				testEnvelope("src", "1", "s1", payload{Match: true, Key: "k", Display: &first}),
				testEnvelope("src", "2", "s1", payload{Match: true, Key: "k", Display: &c.display}),
			)
			routeAll(t, h)
			rec := record(t, h, evs[1].ID)
			assert.Equal(t, runtime.DispositionAttached, rec.Disposition, "a bad display never stops routing")
			w := h.work(t, rec.WorkID)
			if c.refused == "" {
				assert.Empty(t, rec.DisplayRefused)
				want, _ := json.Marshal(c.display)
				assert.JSONEq(t, string(want), string(w.Display))
				return
			}
			assert.Contains(t, rec.DisplayRefused, c.refused)
			assert.JSONEq(t, `{"title":"Kept"}`, string(w.Display), "dropped whole, never truncated")
		})
	}
}

func TestValidateDisplayRefusesInvalidUTF8(t *testing.T) {
	// Not reachable through a JSON payload (the decoder replaces the
	// bytes), but a Go handler can return it.
	err := runtime.ValidateDisplay(runtime.Display{Title: "a\xffb"})
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.Contains(t, err.Error(), "UTF-8")
}

func TestRouteTraceWritesNothing(t *testing.T) {
	kh := &keyedHandler{}
	h := newHarness(t, runtime.Config{
		Handlers: map[string]runtime.RouteHandler{"keyed": kh, "never": &keyedHandler{}},
		Routes: map[string][]runtime.Route{
			"s1": {{Handler: "keyed", Kind: "task"}, {Handler: "keyed", Kind: "second"}},
		},
	})
	bad := runtime.Display{Title: strings.Repeat("x", 300)}
	ev := runtime.Event{Envelope: testEnvelope("src", "hypo", "", payload{Match: true, Key: "k", Display: &bad})}
	steps, err := h.engine.RouteTrace(context.Background(), "s1", ev)
	require.NoError(t, err)
	require.Len(t, steps, 2)
	assert.True(t, steps[0].Chosen)
	assert.False(t, steps[1].Chosen)
	assert.True(t, steps[1].Decision.Match)
	assert.Contains(t, steps[0].DisplayRefused, "title")
	assert.Zero(t, h.latest(t))
	assert.Empty(t, h.works(t))
	cursor, err := h.engine.RoutingCursor(context.Background())
	require.NoError(t, err)
	assert.Zero(t, cursor)
}

// A Work the handler saw changes before the routing transaction: routing
// decides again on a fresh snapshot.
func TestRoutingRerunsAfterRevisionConflict(t *testing.T) {
	ctx := context.Background()
	kh := &keyedHandler{}
	h := routingHarness(t, kh)
	first := accept(t, h, testEnvelope("src", "1", "s1", payload{Match: true, Key: "k"}))
	routeAll(t, h)
	workID := record(t, h, first[0].ID).WorkID

	bumped := false
	kh.before = func(in runtime.RouteInput) {
		if bumped || in.Work == nil {
			return
		}
		bumped = true
		require.NoError(t, h.store.Transact(ctx, func(tx runtime.Tx) error {
			w, err := tx.Work(workID)
			if err != nil {
				return err
			}
			w.Display = json.RawMessage(`{"title":"concurrent"}`)
			_, err = tx.PutWork(w)
			return err
		}))
	}
	env := testEnvelope("src", "2", "s1", payload{Match: true, Key: "k"})
	env.Works = []string{workID}
	second := accept(t, h, env)
	calls := kh.calls.Load()
	routeAll(t, h)
	assert.Equal(t, calls+2, kh.calls.Load(), "the handler decided twice")
	assert.Equal(t, runtime.DispositionAttached, record(t, h, second[0].ID).Disposition)
	assert.JSONEq(t, `{"title":"concurrent"}`, string(h.work(t, workID).Display))
}

func TestClipLine(t *testing.T) {
	assert.Equal(t, "first", runtime.ClipLine("first\nsecond", 200))
	assert.Equal(t, "ab", runtime.ClipLine("a\x07b", 200))
	assert.Equal(t, "héé", runtime.ClipLine("hééé", 6), "cut on a rune boundary")
	assert.Equal(t, "ok", runtime.ClipLine("  ok \r\nrest", 200))
	assert.Equal(t, "ab", runtime.ClipLine("a\xffb", 200))
}

// Events decided together apply in one transaction; an Event whose
// snapshot an earlier Event of the batch made stale is decided again.
func TestRoutingBatchDecidesStaleEventAgain(t *testing.T) {
	kh := &keyedHandler{}
	h := routingHarness(t, kh)
	first := accept(t, h, testEnvelope("src", "1", "s1", payload{Match: true, Key: "k"}))
	routeAll(t, h)
	workID := record(t, h, first[0].ID).WorkID

	retitle := runtime.Display{Title: "Retitled"}
	named := testEnvelope("src", "3", "s1", payload{Match: true, Key: "k"})
	named.Works = []string{workID}
	evs := accept(t, h, testEnvelope("src", "2", "s1", payload{Match: true, Key: "k", Display: &retitle}), named)
	calls := kh.calls.Load()
	n, err := h.engine.RoutePending(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, calls+3, kh.calls.Load(), "the second Event was decided again on a fresh snapshot")
	for _, ev := range evs {
		rec := record(t, h, ev.ID)
		assert.Equal(t, runtime.DispositionAttached, rec.Disposition)
		assert.Equal(t, workID, rec.WorkID)
	}
}

// TestRoutingNeverOffersAForeignWork: an Event of s1 that names (works) a
// Work of another scope, filed under it by the store and holding the key a
// Wait of that Work waits on, is routed as if it named nothing: the
// handler is offered no Work (neither in routing nor in a trace), the
// foreign Work's Wait is not woken and the Event is not attached to it. A
// Work of its own scope that it names is offered.
func TestRoutingNeverOffersAForeignWork(t *testing.T) {
	var offered []*runtime.Work
	kh := &keyedHandler{before: func(in runtime.RouteInput) { offered = append(offered, in.Work) }}
	h := routingHarness(t, kh)
	ctx := context.Background()
	foreign := runtime.Work{ID: "wk-foreign", ScopeID: "elsewhere", Kind: "task", State: runtime.WorkWaiting,
		CorrelationKeys: []string{"k1"}, Display: json.RawMessage(`{"title":"not yours"}`)}
	own := runtime.Work{ID: "wk-own", ScopeID: "s1", Kind: "task", State: runtime.WorkPending}
	var wait runtime.Wait
	require.NoError(t, h.store.Transact(ctx, func(tx runtime.Tx) error {
		for _, w := range []runtime.Work{foreign, own} {
			if _, err := tx.PutWork(w); err != nil {
				return err
			}
		}
		var err error
		wait, err = tx.PutWait(runtime.Wait{ID: "wt-foreign", WorkID: foreign.ID, Keys: []string{"k1"}, Owner: "x", State: runtime.WaitActive})
		return err
	}))

	naming := testEnvelope("src", "1", "s1", payload{Match: true, Key: "k1"})
	naming.Works = []string{foreign.ID}
	evs := accept(t, h, naming)
	routeAll(t, h)

	require.Len(t, offered, 1)
	assert.Nil(t, offered[0], "the handler was offered the Work of another scope")
	rec := record(t, h, evs[0].ID)
	assert.Equal(t, runtime.DispositionCreated, rec.Disposition)
	assert.NotEqual(t, foreign.ID, rec.WorkID)
	assert.Empty(t, rec.Woke, "the Event woke a Wait of another scope")
	assert.Equal(t, runtime.WorkWaiting, h.work(t, foreign.ID).State)
	h.view(t, func(r runtime.ReadTx) error {
		ws, err := r.Waits(foreign.ID)
		require.NoError(t, err)
		require.Len(t, ws, 1)
		assert.Equal(t, runtime.WaitActive, ws[0].State, "wait %s", wait.ID)
		return nil
	})

	offered = nil
	trace := testEnvelope("src", "t", "s1", payload{Match: true})
	trace.Works = []string{foreign.ID, own.ID}
	_, err := h.engine.RouteTrace(ctx, "s1", runtime.Event{Envelope: trace})
	require.NoError(t, err)
	require.Len(t, offered, 1)
	require.NotNil(t, offered[0], "the Event's own-scope Work was not offered")
	assert.Equal(t, own.ID, offered[0].ID)
}
