package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

func TestWaitOneActiveClippedAndOwned(t *testing.T) {
	ctx := context.Background()
	h := routingHarness(t, &keyedHandler{})
	w := newWork(t, h, "1", "k1")

	desc := strings.Repeat("é", 150) + "\nsecond line"
	wt, err := h.engine.DeclareWait(ctx, w.ID, "ext", runtime.WaitRequest{Keys: []string{"pr:1"}, Description: desc})
	require.NoError(t, err)
	assert.LessOrEqual(t, len(wt.Description), runtime.MaxWaitDescription)
	assert.Equal(t, strings.Repeat("é", 100), wt.Description, "first line, cut on a rune within 200 bytes")
	assert.Equal(t, runtime.WorkWaiting, h.work(t, w.ID).State)

	_, err = h.engine.DeclareWait(ctx, w.ID, "ext", runtime.WaitRequest{Keys: []string{"other"}})
	require.ErrorIs(t, err, runtime.ErrConflict, "one active Wait per Work")

	require.NoError(t, h.engine.SetWaitProgress(ctx, w.ID, "ext", "3 of 7 checks finished\nmore"+strings.Repeat("x", 200)))
	require.ErrorIs(t, h.engine.SetWaitProgress(ctx, w.ID, "intruder", "hijack"), runtime.ErrUnauthorized)
	require.ErrorIs(t, h.engine.SetWaitProgress(ctx, w.ID, "", "hijack"), runtime.ErrUnauthorized)
	var got runtime.Wait
	h.view(t, func(r runtime.ReadTx) error {
		got, err = r.ActiveWait(w.ID)
		return err
	})
	assert.Equal(t, "3 of 7 checks finished", got.Progress)

	long := strings.Repeat("y", 300)
	require.NoError(t, h.engine.SetWaitProgress(ctx, w.ID, "ext", long))
	h.view(t, func(r runtime.ReadTx) error {
		got, err = r.ActiveWait(w.ID)
		return err
	})
	assert.Len(t, got.Progress, runtime.MaxWaitProgress)

	// A matching Event wakes it; the Work goes back to pending.
	evs := accept(t, h, testEnvelope("src", "2", "s1", payload{Match: true, Key: "pr:1"}))
	routeAll(t, h)
	rec := record(t, h, evs[0].ID)
	assert.Equal(t, []string{wt.ID}, rec.Woke)
	assert.Equal(t, runtime.DispositionAttached, rec.Disposition)
	assert.Equal(t, w.ID, rec.WorkID, "the input goes where its Wait sends it")
	assert.Len(t, h.works(t), 1, "no Work of its own")
	h.view(t, func(r runtime.ReadTx) error {
		got, err = r.Wait(wt.ID)
		return err
	})
	assert.Equal(t, runtime.WaitSatisfied, got.State)
	assert.Equal(t, runtime.WorkPending, h.work(t, w.ID).State)
	require.ErrorIs(t, h.engine.SetWaitProgress(ctx, w.ID, "ext", "late"), runtime.ErrNotFound)

	// The Wait is resolved, so another may be declared.
	_, err = h.engine.DeclareWait(ctx, w.ID, "ext", runtime.WaitRequest{Keys: []string{"pr:2"}})
	require.NoError(t, err)
}

type filterFunc func(runtime.Wait, runtime.Event) (bool, error)

func (f filterFunc) Matches(w runtime.Wait, ev runtime.Event) (bool, error) { return f(w, ev) }

func TestDependencyFilterFailureIsNoMatch(t *testing.T) {
	ctx := context.Background()
	calls := 0
	filter := filterFunc(func(_ runtime.Wait, ev runtime.Event) (bool, error) {
		calls++
		if calls == 1 {
			return false, errors.New("filter crashed")
		}
		return true, nil
	})
	h := newHarness(t, runtime.Config{
		Handlers:   map[string]runtime.RouteHandler{"keyed": &keyedHandler{}},
		Routes:     map[string][]runtime.Route{"s1": {{Handler: "keyed", Kind: "task"}}},
		Operations: map[string]runtime.OperationSpec{"ext.wait": {Operation: &effectOp{}, Owner: runtime.Emitter{Name: "ext"}, Filter: filter}},
	})
	w := newWork(t, h, "1", "k1")
	wt, err := h.engine.DeclareWait(ctx, w.ID, "ext", runtime.WaitRequest{Keys: []string{"pr:1"}})
	require.NoError(t, err)
	first := accept(t, h, testEnvelope("src", "2", "s1", payload{Match: true, Key: "pr:1"}))
	routeAll(t, h)
	assert.Empty(t, record(t, h, first[0].ID).Woke, "a failing filter is no match")
	second := accept(t, h, testEnvelope("src", "3", "s1", payload{Match: true, Key: "pr:1"}))
	routeAll(t, h)
	assert.Equal(t, []string{wt.ID}, record(t, h, second[0].ID).Woke, "a later Event still wakes it")
}

func TestWaitTimeoutExpires(t *testing.T) {
	ctx := context.Background()
	h := routingHarness(t, &keyedHandler{})
	w := newWork(t, h, "1", "k1")
	wt, err := h.engine.DeclareWait(ctx, w.ID, "", runtime.WaitRequest{Timeout: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, "until 30 Nov 2026 10:00 UTC", wt.Description)

	h.clock.Advance(59 * time.Minute)
	n, err := h.engine.FireDue(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	h.clock.Advance(time.Minute)
	n, err = h.engine.FireDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	var got runtime.Wait
	h.view(t, func(r runtime.ReadTx) error {
		got, err = r.Wait(wt.ID)
		return err
	})
	assert.Equal(t, runtime.WaitExpired, got.State)
	assert.Equal(t, runtime.WorkPending, h.work(t, w.ID).State)
}

// hourly recurs every hour; fail makes Next fail, and payload, when set,
// is the next occurrence's payload.
type hourly struct {
	fail    bool
	payload json.RawMessage
}

func (r *hourly) Next(fired runtime.Timer, _ time.Time) (runtime.Occurrence, error) {
	if r.fail {
		return runtime.Occurrence{}, errors.New("bad spec " + fired.Recurrence)
	}
	if fired.Recurrence == "once" {
		return runtime.Occurrence{}, nil
	}
	return runtime.Occurrence{Due: fired.Due.Add(time.Hour), Payload: r.payload}, nil
}

func TestTimerFiresAndRearmsAtomically(t *testing.T) {
	ctx := context.Background()
	rec := &hourly{}
	h := newHarness(t, runtime.Config{Recurrences: map[string]runtime.Recurrence{"ext.hourly": rec}})
	_, err := h.engine.ArmTimer(ctx, runtime.Timer{Key: "ext/job", ScopeID: "s1", Kind: "ext.hourly", Due: t0.Add(time.Hour), Recurrence: "@hourly", Payload: json.RawMessage(`{"job":"j"}`)})
	require.NoError(t, err)

	timer := func() runtime.Timer {
		var tm runtime.Timer
		h.view(t, func(r runtime.ReadTx) error {
			tm, err = r.Timer("ext/job")
			return err
		})
		return tm
	}

	// A failing recurrence aborts the whole fire: no Event, timer as it was.
	rec.fail = true
	h.clock.Advance(time.Hour)
	_, err = h.engine.FireDue(ctx)
	require.Error(t, err)
	assert.Zero(t, h.latest(t))
	assert.Equal(t, t0.Add(time.Hour), timer().Due)

	rec.fail = false
	n, err := h.engine.FireDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(1), h.latest(t))
	assert.Equal(t, t0.Add(2*time.Hour), timer().Due, "re-armed in the same transaction")
	var ev runtime.Event
	h.view(t, func(r runtime.ReadTx) error {
		evs, err := r.Events(0, 0)
		ev = evs[0]
		return err
	})
	assert.Equal(t, runtime.TimerSource, ev.Source)
	assert.Equal(t, "ext.hourly", ev.Family)
	assert.JSONEq(t, `{"job":"j"}`, string(ev.Payload))

	assert.JSONEq(t, `{"job":"j"}`, string(timer().Payload), "no payload from the recurrence keeps the timer's")

	// Nothing more is due until the next hour.
	n, err = h.engine.FireDue(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)

	// A recurrence's payload is the next occurrence's.
	rec.payload = json.RawMessage(`{"job":"j","run":2}`)
	h.clock.Advance(time.Hour)
	n, err = h.engine.FireDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, t0.Add(3*time.Hour), timer().Due)
	assert.JSONEq(t, `{"job":"j","run":2}`, string(timer().Payload))

	// A recurrence that ends removes the timer after its last fire.
	_, err = h.engine.ArmTimer(ctx, runtime.Timer{Key: "ext/job", ScopeID: "s1", Kind: "ext.hourly", Due: t0.Add(3 * time.Hour), Recurrence: "once"})
	require.NoError(t, err)
	h.clock.Advance(time.Hour)
	n, err = h.engine.FireDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	h.view(t, func(r runtime.ReadTx) error {
		_, err := r.Timer("ext/job")
		assert.ErrorIs(t, err, runtime.ErrNotFound)
		return nil
	})
	cancelled, err := h.engine.CancelTimer(ctx, "ext/job")
	require.NoError(t, err)
	assert.False(t, cancelled)
}

func emitHarness(t *testing.T, limits runtime.CausalLimits) *harness {
	return newHarness(t, runtime.Config{Causal: limits})
}

var notes = runtime.Emitter{Name: "notes", Families: []string{"notes.note"}, Scopes: []string{"s1", "s2"}}

func emission(delivery, parent string) runtime.Emission {
	return runtime.Emission{Source: "notes/inbox", DeliveryID: delivery, ScopeID: "s1", Family: "notes.note", Parent: parent}
}

func TestEmitAcceptsWithRecordsAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	h := emitHarness(t, runtime.CausalLimits{})
	batch := runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "notes.index", Key: "d-1", Value: []byte("x")}}}
	out, err := h.engine.Emit(ctx, notes, batch, []runtime.Emission{emission("d-1", "")})
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.True(t, out[0].Added)
	// The protocol's EmittedEventID("notes/inbox", "d-1").
	assert.Equal(t, "evt_2eae9aca6e5e25afa4b6d895cac7767986d5546d303bd67dc56478e0a22d27cd", out[0].Event.ID)
	assert.Equal(t, out[0].Event.ID, runtime.EmittedEventID("notes/inbox", "d-1"))

	again, err := h.engine.Emit(ctx, notes, runtime.KVBatch{}, []runtime.Emission{emission("d-1", "")})
	require.NoError(t, err)
	assert.False(t, again[0].Added)
	assert.Equal(t, out[0].Event.ID, again[0].Event.ID)
	assert.Equal(t, int64(1), h.latest(t))
}

func TestEmitRefusalsApplyNothing(t *testing.T) {
	ctx := context.Background()
	h := emitHarness(t, runtime.CausalLimits{})
	parentOther, err := h.engine.Emit(ctx, notes, runtime.KVBatch{}, []runtime.Emission{{Source: "notes", DeliveryID: "p", ScopeID: "s2", Family: "notes.note"}})
	require.NoError(t, err)
	good := emission("ok", "")
	put := runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "notes", Key: "k", Value: []byte("v")}}}
	for _, c := range []struct {
		name  string
		batch runtime.KVBatch
		em    runtime.Emission
		want  error
	}{
		{"undeclared family", put, runtime.Emission{Source: "notes", DeliveryID: "x", ScopeID: "s1", Family: "notes.other"}, runtime.ErrUnauthorized},
		{"foreign source", put, runtime.Emission{Source: "notesx/a", DeliveryID: "x", ScopeID: "s1", Family: "notes.note"}, runtime.ErrUnauthorized},
		{"unconfigured scope", put, runtime.Emission{Source: "notes", DeliveryID: "x", ScopeID: "s9", Family: "notes.note"}, runtime.ErrUnauthorized},
		{"parent outside scope", put, emission("x", parentOther[0].Event.ID), runtime.ErrInvalid},
		{"unknown parent", put, emission("x", "evt_missing"), runtime.ErrInvalid},
		{"foreign namespace", runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "other", Key: "k", Value: []byte("v")}}}, good, runtime.ErrUnauthorized},
		{"failed precondition", runtime.KVBatch{Preconditions: []runtime.KVPrecondition{{Namespace: "notes", Key: "k", Version: "sha256:00"}}}, good, runtime.ErrConflict},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := h.latest(t)
			_, err := h.engine.Emit(ctx, notes, c.batch, []runtime.Emission{good, c.em})
			require.ErrorIs(t, err, c.want)
			assert.Equal(t, before, h.latest(t), "not even the good emission")
			h.view(t, func(r runtime.ReadTx) error {
				_, found, err := r.KVGet("notes", "k")
				assert.False(t, found)
				return err
			})
		})
	}
}

func TestCausalLimitsRefuseAlone(t *testing.T) {
	ctx := context.Background()
	h := emitHarness(t, runtime.CausalLimits{MaxDepth: 2, PerMinute: 4})
	root, err := h.engine.Emit(ctx, notes, runtime.KVBatch{}, []runtime.Emission{emission("root", "")})
	require.NoError(t, err)
	d1, err := h.engine.Emit(ctx, notes, runtime.KVBatch{}, []runtime.Emission{emission("d1", root[0].Event.ID)})
	require.NoError(t, err)
	d2, err := h.engine.Emit(ctx, notes, runtime.KVBatch{}, []runtime.Emission{emission("d2", d1[0].Event.ID)})
	require.NoError(t, err)
	assert.Equal(t, 2, d2[0].Event.Depth)

	// Depth 3 is over the limit; it is refused alone, the rest commits.
	batch := runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "notes", Key: "k", Value: []byte("v")}}}
	out, err := h.engine.Emit(ctx, notes, batch, []runtime.Emission{emission("d3", d2[0].Event.ID), emission("other-root", "")})
	require.NoError(t, err)
	require.ErrorIs(t, out[0].Refused, runtime.ErrCausalLimit)
	assert.Empty(t, out[0].Event.ID)
	assert.True(t, out[1].Added)
	h.view(t, func(r runtime.ReadTx) error {
		_, found, err := r.KVGet("notes", "k")
		assert.True(t, found, "the batch committed")
		_, err2 := r.EventByDelivery("notes/inbox", "d3")
		assert.ErrorIs(t, err2, runtime.ErrNotFound)
		return err
	})

	// Per minute: the chain has 3 Events this minute; one more fits.
	out, err = h.engine.Emit(ctx, notes, runtime.KVBatch{}, []runtime.Emission{emission("d1b", root[0].Event.ID), emission("d1c", root[0].Event.ID)})
	require.NoError(t, err)
	assert.True(t, out[0].Added)
	require.ErrorIs(t, out[1].Refused, runtime.ErrCausalLimit)

	// Emitting an accepted identity again is never refused.
	out, err = h.engine.Emit(ctx, notes, runtime.KVBatch{}, []runtime.Emission{emission("d1", root[0].Event.ID)})
	require.NoError(t, err)
	assert.NoError(t, out[0].Refused)
	assert.False(t, out[0].Added)

	// The next minute has room again.
	h.clock.Advance(time.Minute)
	out, err = h.engine.Emit(ctx, notes, runtime.KVBatch{}, []runtime.Emission{emission("d1c", root[0].Event.ID)})
	require.NoError(t, err)
	assert.True(t, out[0].Added)

	refusals, err := h.engine.Refusals(ctx)
	require.NoError(t, err)
	require.Len(t, refusals, 2)
	reasons := []string{refusals[0].Reason, refusals[1].Reason}
	assert.Contains(t, strings.Join(reasons, "|"), "depth 3")
	assert.Contains(t, strings.Join(reasons, "|"), "this minute")
}

// TestEmitNamesOnlyWorkTheEmitterSees: an Emission may name (works) a Work
// of one of the emitter's scopes or of one of its kinds; one of another
// scope and kind is refused exactly as a Work that does not exist, and the
// batch applies nothing.
func TestEmitNamesOnlyWorkTheEmitterSees(t *testing.T) {
	ctx := context.Background()
	h := emitHarness(t, runtime.CausalLimits{})
	em := notes
	em.Kinds = []string{"notes-review"}
	require.NoError(t, h.store.Transact(ctx, func(tx runtime.Tx) error {
		for _, w := range []runtime.Work{
			{ID: "wk-scope", ScopeID: "s1", Kind: "other", State: runtime.WorkPending},
			{ID: "wk-kind", ScopeID: "s9", Kind: "notes-review", State: runtime.WorkPending},
			{ID: "wk-foreign", ScopeID: "s9", Kind: "other", State: runtime.WorkPending},
		} {
			if _, err := tx.PutWork(w); err != nil {
				return err
			}
		}
		return nil
	}))
	naming := func(delivery string, works ...string) runtime.Emission {
		e := emission(delivery, "")
		e.Works = works
		return e
	}
	out, err := h.engine.Emit(ctx, em, runtime.KVBatch{}, []runtime.Emission{naming("own", "wk-scope", "wk-kind")})
	require.NoError(t, err)
	assert.Equal(t, []string{"wk-kind", "wk-scope"}, out[0].Event.Works)

	put := runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "notes", Key: "k", Value: []byte("v")}}}
	answers := map[string]string{}
	for _, id := range []string{"wk-foreign", "wk-missing"} {
		before := h.latest(t)
		_, err := h.engine.Emit(ctx, em, put, []runtime.Emission{emission("good-"+id, ""), naming("bad-"+id, "wk-scope", id)})
		require.ErrorIs(t, err, runtime.ErrNotFound, id)
		answers[id] = strings.ReplaceAll(err.Error(), id, "ID")
		assert.Equal(t, before, h.latest(t), "not even the good emission")
	}
	assert.Equal(t, answers["wk-missing"], answers["wk-foreign"], "a foreign Work answers as a missing one")
	h.view(t, func(r runtime.ReadTx) error {
		_, found, err := r.KVGet("notes", "k")
		assert.False(t, found)
		return err
	})
}
