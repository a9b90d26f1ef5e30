package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

// fakeSource is an upstream of items served in pages by item order, and
// push deliveries whose body is a JSON list of payload keys.
type fakeSource struct {
	mu    sync.Mutex
	items map[string]fakeItem // by item
	// failPage, when > 0, fails that page (1-based) of every scan.
	failPage   int
	checkpoint string
}

type fakeItem struct {
	version string
	body    string
}

func (s *fakeSource) set(item, version, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.items == nil {
		s.items = map[string]fakeItem{}
	}
	s.items[item] = fakeItem{version, body}
}

func (s *fakeSource) remove(item string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.items, item)
}

func (s *fakeSource) Push(_ context.Context, d runtime.Delivery) ([]runtime.Envelope, error) {
	var keys []string
	if err := json.Unmarshal(d.Body, &keys); err != nil {
		return nil, fmt.Errorf("bad delivery: %w", err)
	}
	var out []runtime.Envelope
	for i, k := range keys {
		b, _ := json.Marshal(payload{Key: k, Match: true})
		out = append(out, runtime.Envelope{DeliveryID: d.ID + "/" + strconv.Itoa(i), Family: "test.item", Payload: b})
	}
	return out, nil
}

func (s *fakeSource) Reconcile(_ context.Context, req runtime.ReconcileRequest) (runtime.ReconcilePage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.items))
	for n := range s.items {
		names = append(names, n)
	}
	sort.Strings(names)
	start := 0
	if req.Cursor != "" {
		start, _ = strconv.Atoi(req.Cursor)
	}
	page := start/req.Limit + 1
	if page == s.failPage {
		return runtime.ReconcilePage{}, errors.New("upstream timed out")
	}
	end := min(start+req.Limit, len(names))
	var p runtime.ReconcilePage
	for _, n := range names[start:end] {
		it := s.items[n]
		b, _ := json.Marshal(map[string]string{"body": it.body})
		p.Observations = append(p.Observations, runtime.Observation{
			Item: n, Version: it.version,
			Envelope: runtime.Envelope{DeliveryID: n + "@" + it.version, Family: "test.item", Payload: b},
		})
	}
	if end >= len(names) {
		p.Complete, p.Checkpoint = true, s.checkpoint
	} else {
		p.Next = strconv.Itoa(end)
	}
	return p, nil
}

func ingressHarness(t *testing.T, src *fakeSource) *harness {
	return newHarness(t, runtime.Config{
		Sources: map[string]runtime.Source{"up": {ScopeID: "s1", Ingress: src, PageLimit: 2}},
	})
}

func TestPushAcceptsDurablyAndIdempotently(t *testing.T) {
	ctx := context.Background()
	h := ingressHarness(t, &fakeSource{})
	evs, err := h.engine.Push(ctx, "up", runtime.Delivery{ID: "d1", Body: []byte(`["a","b"]`)})
	require.NoError(t, err)
	require.Len(t, evs, 2)
	// Push returned, so the Events are durable and visible to a new reader.
	h.view(t, func(r runtime.ReadTx) error {
		for _, ev := range evs {
			got, err := r.Event(ev.ID)
			require.NoError(t, err)
			assert.Equal(t, "up", got.Source)
			assert.Equal(t, "s1", got.ScopeID)
		}
		return nil
	})
	again, err := h.engine.Push(ctx, "up", runtime.Delivery{ID: "d1", Body: []byte(`["a","b"]`)})
	require.NoError(t, err)
	assert.Equal(t, evs[0].ID, again[0].ID)
	assert.Equal(t, int64(2), h.latest(t))

	// The same delivery with other content conflicts and accepts nothing,
	// not even its new second envelope.
	_, err = h.engine.Push(ctx, "up", runtime.Delivery{ID: "d1", Body: []byte(`["changed","c","d"]`)})
	require.ErrorIs(t, err, runtime.ErrConflict)
	assert.Equal(t, int64(2), h.latest(t))

	_, err = h.engine.Push(ctx, "up", runtime.Delivery{ID: "d2", Body: []byte(`not json`)})
	require.Error(t, err)
	_, err = h.engine.Push(ctx, "nope", runtime.Delivery{})
	require.ErrorIs(t, err, runtime.ErrNotFound)
}

func TestReconcileDiffsAgainstSnapshot(t *testing.T) {
	ctx := context.Background()
	src := &fakeSource{checkpoint: "c1"}
	for _, n := range []string{"a", "b", "c"} {
		src.set(n, "v1", n)
	}
	h := ingressHarness(t, src)

	rep, err := h.engine.Reconcile(ctx, "up")
	require.NoError(t, err)
	assert.True(t, rep.Complete)
	assert.Equal(t, 2, rep.Pages)
	assert.Len(t, rep.Accepted, 3)
	assert.Empty(t, rep.Absent)

	rep, err = h.engine.Reconcile(ctx, "up")
	require.NoError(t, err)
	assert.Empty(t, rep.Accepted)
	assert.Equal(t, 3, rep.Unchanged)

	src.set("a", "v2", "a changed")
	src.remove("b")
	src.set("d", "v1", "d")
	src.checkpoint = "c2"
	rep, err = h.engine.Reconcile(ctx, "up")
	require.NoError(t, err)
	require.Len(t, rep.Accepted, 2)
	assert.Equal(t, "a@v2", rep.Accepted[0].DeliveryID)
	assert.Equal(t, "d@v1", rep.Accepted[1].DeliveryID)
	assert.Equal(t, []string{"b"}, rep.Absent)

	snap, err := h.engine.Snapshot(ctx, "up")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "v2", "c": "v1", "d": "v1"}, snap)
	cp, err := h.engine.Checkpoint(ctx, "up")
	require.NoError(t, err)
	assert.Equal(t, "c2", cp.Checkpoint)
	assert.Equal(t, int64(3), cp.Scans)
}

func TestPartialReconcileKeepsCheckpoint(t *testing.T) {
	ctx := context.Background()
	src := &fakeSource{checkpoint: "c1"}
	for _, n := range []string{"a", "b", "c", "d"} {
		src.set(n, "v1", n)
	}
	h := ingressHarness(t, src)
	_, err := h.engine.Reconcile(ctx, "up")
	require.NoError(t, err)

	// Upstream loses d and changes a; the scan breaks on its second page.
	src.remove("d")
	src.set("a", "v2", "a changed")
	src.checkpoint = "c2"
	src.failPage = 2
	rep, err := h.engine.Reconcile(ctx, "up")
	require.Error(t, err)
	assert.False(t, rep.Complete)
	assert.Empty(t, rep.Absent, "a partial scan infers no absence")

	cp, err := h.engine.Checkpoint(ctx, "up")
	require.NoError(t, err)
	assert.Equal(t, "c1", cp.Checkpoint, "a partial scan advances no checkpoint")
	assert.Equal(t, int64(1), cp.Scans)
	snap, err := h.engine.Snapshot(ctx, "up")
	require.NoError(t, err)
	assert.Contains(t, snap, "d", "d is still believed present")

	// The next complete scan infers d's absence.
	src.failPage = 0
	rep, err = h.engine.Reconcile(ctx, "up")
	require.NoError(t, err)
	assert.Equal(t, []string{"d"}, rep.Absent)
	cp, err = h.engine.Checkpoint(ctx, "up")
	require.NoError(t, err)
	assert.Equal(t, "c2", cp.Checkpoint)
}

// A scan that breaks off after an item was seen must still infer the
// absence of that item if it is gone by the next complete scan.
func TestPartialReconcileDoesNotHideLaterAbsence(t *testing.T) {
	ctx := context.Background()
	src := &fakeSource{}
	for _, n := range []string{"a", "b", "c"} {
		src.set(n, "v1", n)
	}
	h := ingressHarness(t, src)
	_, err := h.engine.Reconcile(ctx, "up")
	require.NoError(t, err)
	src.failPage = 2
	_, err = h.engine.Reconcile(ctx, "up") // sees a and b, then breaks
	require.Error(t, err)
	src.failPage = 0
	src.remove("a")
	rep, err := h.engine.Reconcile(ctx, "up")
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, rep.Absent)
}

func TestReconcileIdentityConflictAcceptsNothing(t *testing.T) {
	ctx := context.Background()
	src := &fakeSource{checkpoint: "c1"}
	src.set("a", "v1", "a")
	src.set("b", "v1", "b")
	h := ingressHarness(t, src)
	_, err := h.engine.Reconcile(ctx, "up")
	require.NoError(t, err)
	before := h.latest(t)

	// Same (item, version), different content; and a new item on the
	// same page, which must not be accepted either.
	src.set("a", "v1", "a rewritten")
	src.set("aa", "v1", "new")
	src.checkpoint = "c2"
	rep, err := h.engine.Reconcile(ctx, "up")
	require.ErrorIs(t, err, runtime.ErrConflict)
	assert.False(t, rep.Complete)
	assert.Empty(t, rep.Accepted)
	assert.Equal(t, before, h.latest(t), "nothing from the page is accepted")
	cp, err := h.engine.Checkpoint(ctx, "up")
	require.NoError(t, err)
	assert.Equal(t, "c1", cp.Checkpoint, "nothing advances")
	snap, err := h.engine.Snapshot(ctx, "up")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, sortedKeys(snap))
}

func TestReconcileDeliveryConflict(t *testing.T) {
	ctx := context.Background()
	src := &fakeSource{}
	h := ingressHarness(t, src)
	// A push already took the delivery ID the scan will use, with other
	// content: the page conflicts.
	_, err := h.engine.Accept(ctx, runtime.Envelope{Source: "up", DeliveryID: "a@v1", ScopeID: "s1", Family: "test.item"})
	require.NoError(t, err)
	src.set("a", "v1", "a")
	_, err = h.engine.Reconcile(ctx, "up")
	require.ErrorIs(t, err, runtime.ErrConflict)
	snap, err := h.engine.Snapshot(ctx, "up")
	require.NoError(t, err)
	assert.Empty(t, snap)
}
