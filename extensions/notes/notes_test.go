package notes_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

func TestReleases(t *testing.T) {
	file, err := os.ReadFile(protocol.ManifestFile)
	require.NoError(t, err)
	assert.Equal(t, file, notes.Extension().Manifest, "release 3 is the directory's manifest")

	for n, want := range map[int]struct {
		versions []int
		kv       int
	}{1: {[]int{1}, 0}, 2: {[]int{1, 2}, 0}, 3: {[]int{1, 2, 3}, 2}} {
		ext := notes.Release(n)
		require.NotNil(t, ext, "release %d", n)
		m, err := protocol.ParseManifest(ext.Manifest)
		require.NoError(t, err, "release %d", n)
		assert.Equal(t, want.versions, m.Provides.Schemas[0].Versions, "release %d", n)
		assert.Equal(t, want.kv, m.KVVersion, "release %d", n)
		assert.Len(t, ext.Upcasters, n-1, "release %d upcasts every older version", n)
		_, err = sdk.Attach(ext, sdktest.New())
		assert.NoError(t, err, "release %d matches its manifest", n)
	}
	assert.Nil(t, notes.Release(0))
	assert.Nil(t, notes.Release(4))
}

func TestIngress(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			s := startRelease(t, m, 3)
			for _, r := range []notes.Record{
				{ID: "a", Rev: "1", Title: "first"},
				{ID: "b", Rev: "4", Title: "second", Tags: []string{"x"}},
				{ID: "c", Rev: "2", Title: "third", Link: "https://notes.example/c"},
			} {
				require.NoError(t, s.store.Put(r))
			}

			var pages []protocol.IngressReconcileResult
			cursor := ""
			for range 5 {
				var page protocol.IngressReconcileResult
				require.NoError(t, s.c.Call(ctx, "ingress.reconcile", protocol.IngressReconcileParams{Type: notes.Name,
					Source: s.source, ScopeID: "team", EntryID: "inbox", Cursor: cursor, MaxItems: 2}, &page))
				pages = append(pages, page)
				if page.Complete {
					break
				}
				require.NotEmpty(t, page.Next, "a page neither complete nor continued")
				cursor = page.Next
			}
			require.Len(t, pages, 2)
			assert.False(t, pages[0].Complete)
			var seen []string
			for _, p := range pages {
				for _, o := range p.Observations {
					seen = append(seen, o.Item+"@"+o.Version)
					assert.Equal(t, s.source, o.Event.Source)
					assert.Equal(t, "notes.note.v3", o.Event.Schema)
					assert.Equal(t, o.Item+"@"+o.Version+".s3", o.Event.DeliveryID, "the delivery id names the schema version")
				}
			}
			assert.Equal(t, []string{"a@1", "b@4", "c@2"}, seen)

			// A webhook push of a note is the same Event reconcile reports
			// for that revision, so both paths agree on its identity.
			body, _ := json.Marshal(notes.Delivery{Notes: []notes.Record{{ID: "b", Rev: "4", Title: "second", Tags: []string{"x"}}}})
			var pushed protocol.IngressPushResult
			require.NoError(t, s.c.Call(ctx, "ingress.push", protocol.IngressPushParams{Type: notes.Name, Source: s.source,
				ScopeID: "team", Delivery: protocol.Delivery{ID: "hook-1", Body: body}}, &pushed))
			require.Len(t, pushed.Events, 1)
			assert.Equal(t, pages[0].Observations[1].Event, pushed.Events[0])

			err := s.c.Call(ctx, "ingress.push", protocol.IngressPushParams{Type: notes.Name, Source: s.source,
				Delivery: protocol.Delivery{Body: []byte("not json")}}, nil)
			assert.ErrorIs(t, err, protocol.ErrInvalid)
			err = s.c.Call(ctx, "ingress.reconcile", protocol.IngressReconcileParams{Type: notes.Name, Source: "notes/elsewhere"}, nil)
			assert.ErrorIs(t, err, protocol.ErrNotFound, "a source configure did not register")
		})
	}
}

func TestRoute(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			s := startRelease(t, m, 3)
			match := func(ev protocol.Event, config string) protocol.RouteMatchResult {
				t.Helper()
				p := protocol.RouteMatchParams{Handler: notes.Name, ScopeID: "team", Event: ev}
				if config != "" {
					p.Config = json.RawMessage(config)
				}
				var res protocol.RouteMatchResult
				require.NoError(t, s.c.Call(ctx, "route.match", p, &res))
				return res
			}

			long := strings.Repeat("é", 150) // 300 bytes
			res := match(event("notes.note.v3", `{"id":"n1","title":"Ship it\nsecond line","tags":["x"],"link":"https://notes.example/n1"}`), "")
			require.True(t, res.Match)
			assert.Equal(t, notes.WorkKind, res.Kind)
			assert.Equal(t, []string{"notes:n1"}, res.CorrelationKeys)
			assert.Equal(t, &protocol.Display{Title: "Ship it", Ref: "n1",
				Links: []protocol.DisplayLink{{Label: "Note n1", URL: "https://notes.example/n1"}}}, res.Display)

			res = match(event("notes.note.v3", `{"id":"n2","title":"`+long+`","tags":[],"link":"javascript:alert(1)"}`), "")
			require.True(t, res.Match)
			assert.LessOrEqual(t, len(res.Display.Title), 200, "the title fits the limit")
			assert.True(t, strings.HasPrefix(long, res.Display.Title), "cut at a character boundary, never rewritten")
			assert.Empty(t, res.Display.Links, "only http and https links")

			res = match(event("notes.note.v3", `{"id":"n3","title":"t","tags":["x"]}`), `{"tag":"y"}`)
			assert.False(t, res.Match)
			assert.Contains(t, res.Reason, `not tagged "y"`)
			assert.True(t, match(event("notes.note.v3", `{"id":"n3","title":"t","tags":["y"]}`), `{"tag":"y"}`).Match)

			other := event("", `{}`)
			other.Family = "elsewhere.thing"
			assert.False(t, match(other, "").Match, "a foreign family is not a note")

			now := time.Date(2026, 10, 25, 9, 0, 0, 0, time.UTC)
			var samples protocol.RouteSamplesResult
			require.NoError(t, s.c.Call(ctx, "route.samples", protocol.RouteSamplesParams{Handler: notes.Name, ScopeID: "team", Now: now}, &samples))
			require.Len(t, samples.Samples, 1)
			sample := samples.Samples[0].Event
			assert.True(t, now.Equal(sample.OccurredAt), "a sample is dated by the host's clock")
			assert.Contains(t, string(sample.Payload), "2026-10-25 09:00 UTC")
			m3, err := protocol.ParseManifest(notes.Extension().Manifest)
			require.NoError(t, err)
			assert.NoError(t, m3.CheckWrite(sample.Schema), "the host keeps only samples the extension may write")
		})
	}
}

// TestSchemaEvolution reads payloads of every version with every release:
// an older one is upcast before the handler sees it, and a newer one (an
// Event stored before a downgrade) is answered as no match, the same way
// every time.
func TestSchemaEvolution(t *testing.T) {
	v1 := `{"id":"n1","text":"Title line\nthe body"}`
	v2 := `{"id":"n1","title":"Title line","body":"the body"}`
	v3 := `{"id":"n1","title":"Title line","body":"the body","tags":[]}`
	v4 := `{"id":"n1","headline":"from the future"}`
	cases := []struct {
		release int
		schema  string
		payload string
		match   bool
	}{
		{3, "notes.note.v1", v1, true},
		{3, "notes.note.v2", v2, true},
		{3, "notes.note.v3", v3, true},
		{3, "notes.note.v4", v4, false},
		{2, "notes.note.v1", v1, true},
		{2, "notes.note.v2", v2, true},
		{2, "notes.note.v3", v3, false},
		{1, "notes.note.v1", v1, true},
		{1, "notes.note.v2", v2, false},
		{1, "notes.note.v3", v3, false},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			releases := map[int]*started{}
			for _, c := range cases {
				s := releases[c.release]
				if s == nil {
					s = startRelease(t, m, c.release)
					releases[c.release] = s
				}
				for range 2 { // the same answer every time
					var res protocol.RouteMatchResult
					require.NoError(t, s.c.Call(ctx, "route.match", protocol.RouteMatchParams{Handler: notes.Name,
						ScopeID: "team", Event: event(c.schema, c.payload)}, &res))
					assert.Equal(t, c.match, res.Match, "release %d reading %s: %s", c.release, c.schema, res.Reason)
					if c.match {
						assert.Equal(t, "Title line", res.Display.Title, "release %d reading %s", c.release, c.schema)
					} else {
						assert.Contains(t, res.Reason, "newer", "release %d reading %s", c.release, c.schema)
					}
				}
			}
		})
	}
}

// TestUpcastersChain checks the upcast itself: a stored v1 payload as the
// release 3 handler sees it.
func TestUpcastersChain(t *testing.T) {
	ext := notes.Extension()
	p := json.RawMessage(`{"id":"n1","text":"Title line\n  the body  "}`)
	var err error
	for _, step := range []string{"notes.note.v1", "notes.note.v2"} {
		p, err = ext.Upcasters[step](p)
		require.NoError(t, err, step)
	}
	assert.JSONEq(t, `{"id":"n1","title":"Title line","body":"the body","tags":[]}`, string(p))
	_, err = ext.Upcasters["notes.note.v1"](json.RawMessage(`"not an object"`))
	assert.Error(t, err)
}

func TestAddOnce(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			s := startRelease(t, m, 3)
			add := func(requestID, title string) (protocol.OperationCallResult, error) {
				var res protocol.OperationCallResult
				err := s.c.Call(ctx, "operation.call", protocol.OperationCallParams{Operation: notes.OpAdd, RequestID: requestID,
					Input: json.RawMessage(`{"title":"` + title + `"}`), Authority: protocol.Authority{ScopeID: "team"}}, &res)
				return res, err
			}
			first, err := add("req-1", "Buy milk")
			require.NoError(t, err)
			again, err := add("req-1", "Buy milk")
			require.NoError(t, err)
			assert.JSONEq(t, string(first.Output), string(again.Output), "a retry answers the first call's result")
			_, err = add("req-2", "Buy bread")
			require.NoError(t, err)

			ids, err := s.store.IDs()
			require.NoError(t, err)
			assert.Len(t, ids, 2, "one note per request ID")
			var out notes.AddOutput
			require.NoError(t, json.Unmarshal(first.Output, &out))
			assert.NotNil(t, s.host.KV(notes.NamespaceIndex, "note/"+out.Note), "layout 2 keeps the note's record in the index")
			assert.JSONEq(t, `{"notes":2}`, string(s.host.KV(notes.NamespaceIndex, "count")))

			_, err = add("req-3", "")
			assert.ErrorIs(t, err, protocol.ErrInvalid)
			var res protocol.OperationCallResult
			err = s.c.Call(ctx, "operation.call", protocol.OperationCallParams{Operation: notes.OpAdd, RequestID: "req-4",
				Input: json.RawMessage(`{"title":"x"}`), Authority: protocol.Authority{ScopeID: "other"}}, &res)
			assert.ErrorIs(t, err, protocol.ErrNotFound, "no notes entry in the caller's scope")
		})
	}
}

// TestAddReplayWindow drills the window between a handler's effect and the
// record of its result: the first attempt writes its note, then fails to
// record that it finished (as a crash there would); the retry with the
// same request ID finds the note and makes no second one.
func TestAddReplayWindow(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			s := startRelease(t, m, 3)
			var mu sync.Mutex
			failed := false
			s.host.Override = func(ctx context.Context, method string, params any) (any, bool, error) {
				if method != "kv.commit" {
					return nil, false, nil
				}
				p, err := protocol.DecodeParams[protocol.KVCommitParams](params)
				if err != nil {
					return nil, true, err
				}
				mu.Lock()
				defer mu.Unlock()
				if !failed && len(p.Puts) == 1 && p.Puts[0].Namespace == notes.Name+sdk.OnceNamespace && strings.Contains(string(p.Puts[0].Value), `"done":true`) {
					failed = true
					return nil, true, errors.New("lost before the result was recorded")
				}
				return nil, false, nil
			}
			call := protocol.OperationCallParams{Operation: notes.OpAdd, RequestID: "req-1",
				Input: json.RawMessage(`{"title":"once"}`), Authority: protocol.Authority{ScopeID: "team"}}
			err := s.c.Call(ctx, "operation.call", call, nil)
			require.Error(t, err, "the first attempt fails after its effect")
			ids, err := s.store.IDs()
			require.NoError(t, err)
			require.Len(t, ids, 1, "the effect happened")

			var res protocol.OperationCallResult
			require.NoError(t, s.c.Call(ctx, "operation.call", call, &res))
			ids, err = s.store.IDs()
			require.NoError(t, err)
			assert.Len(t, ids, 1, "the retry made no second note")
			assert.JSONEq(t, `{"note":"`+ids[0]+`"}`, string(res.Output))
			assert.JSONEq(t, `{"notes":1}`, string(s.host.KV(notes.NamespaceIndex, "count")))
		})
	}
}

func TestAwaitAndPublish(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			s := startRelease(t, m, 3)
			require.NoError(t, s.store.Put(notes.Record{ID: "n7", Rev: "1", Title: "Quarterly plan"}))
			auth := protocol.Authority{ScopeID: "team", WorkID: "work-1"}

			var wait protocol.OperationWaitResult
			require.NoError(t, s.c.Call(ctx, "operation.wait", protocol.OperationWaitParams{Operation: notes.OpAwait,
				RequestID: "r1", Input: json.RawMessage(`{"note":"n7"}`), Authority: auth}, &wait))
			assert.Equal(t, []string{"notes:n7"}, wait.Wait.Keys)
			assert.Equal(t, "note n7 (Quarterly plan) to change", wait.Wait.Description)
			err := s.c.Call(ctx, "operation.wait", protocol.OperationWaitParams{Operation: notes.OpAwait,
				Input: json.RawMessage(`{"note":"../x"}`), Authority: auth}, nil)
			assert.ErrorIs(t, err, protocol.ErrInvalid)

			var emit protocol.OperationEmitResult
			call := protocol.OperationEmitParams{Operation: notes.OpPublish, RequestID: "r2",
				Input: json.RawMessage(`{"title":"Released","body":"v3 is out"}`), Authority: auth}
			require.NoError(t, s.c.Call(ctx, "operation.emit", call, &emit))
			assert.Equal(t, notes.FamilyPublished, emit.Event.Family)
			assert.Equal(t, "notes.note.v3", emit.Event.Schema)
			assert.Equal(t, []string{"work-1"}, emit.Event.Works)
			var again protocol.OperationEmitResult
			require.NoError(t, s.c.Call(ctx, "operation.emit", call, &again))
			assert.Equal(t, emit.Event, again.Event, "a retry plans the same Event")

			// The host accepts the Event and asks for its records inside
			// the same transaction.
			accepted := protocol.Event{ID: protocol.EmittedEventID(emit.Event.Source, emit.Event.DeliveryID), Sequence: 42,
				ScopeID: "team", Source: emit.Event.Source, DeliveryID: emit.Event.DeliveryID, Family: emit.Event.Family,
				Schema: emit.Event.Schema, Payload: emit.Event.Payload, Root: "root-1", Depth: 2}
			var commit protocol.EmitCommitResult
			require.NoError(t, s.c.Call(ctx, "emit.commit", protocol.EmitCommitParams{Operation: notes.OpPublish,
				RequestID: "r2", Event: accepted, Commit: emit.Commit}, &commit))
			require.Len(t, commit.Puts, 1)
			assert.Equal(t, notes.NamespacePublished, commit.Puts[0].Namespace)
			var rec notes.PublishedRecord
			require.NoError(t, json.Unmarshal(commit.Puts[0].Value, &rec))
			assert.Equal(t, notes.PublishedRecord{Note: commit.Puts[0].Key, Event: accepted.ID, Sequence: 42, Root: "root-1", Depth: 2, RequestID: "r2"}, rec)
		})
	}
}

func TestDigest(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			s := startRelease(t, m, 3)
			var mu sync.Mutex
			var armed []protocol.TimerArmParams
			s.host.Override = func(ctx context.Context, method string, params any) (any, bool, error) {
				if method == "timer.arm" {
					p, err := protocol.DecodeParams[protocol.TimerArmParams](params)
					mu.Lock()
					armed = append(armed, p)
					mu.Unlock()
					return protocol.TimerArmResult{Timer: protocol.Timer{Key: p.Key, Due: p.Due}}, true, err
				}
				return nil, false, nil
			}
			now := time.Date(2026, 10, 25, 10, 0, 0, 0, time.UTC)
			var task protocol.TaskRunResult
			require.NoError(t, s.c.Call(ctx, "task.run", protocol.TaskRunParams{Task: notes.TaskDigestArm, Now: now}, &task))
			assert.Equal(t, "armed 1 digest timers", task.Detail)
			require.Len(t, armed, 1)
			assert.Equal(t, notes.DigestTimerKey("team", "inbox"), armed[0].Key)
			assert.Equal(t, notes.Recurrence, armed[0].Recurrence)
			assert.Equal(t, time.Date(2026, 10, 26, 9, 30, 0, 0, time.UTC), armed[0].Due.UTC(), "09:30 has passed today: tomorrow")

			next := func(due, now time.Time) time.Time {
				var res protocol.RecurrenceNextResult
				require.NoError(t, s.c.Call(ctx, "recurrence.next", protocol.RecurrenceNextParams{Recurrence: notes.Recurrence,
					Timer: protocol.Timer{Key: armed[0].Key, Due: due, Payload: armed[0].Payload}, Now: now}, &res))
				return res.Next.UTC()
			}
			fired := time.Date(2026, 10, 26, 9, 30, 0, 0, time.UTC)
			assert.Equal(t, fired.AddDate(0, 0, 1), next(fired, fired), "daily")
			assert.Equal(t, time.Date(2026, 10, 30, 9, 30, 0, 0, time.UTC), next(fired, time.Date(2026, 10, 29, 12, 0, 0, 0, time.UTC)),
				"a late firing continues from now, without a burst")
			var res protocol.RecurrenceNextResult
			require.NoError(t, s.c.Call(ctx, "recurrence.next", protocol.RecurrenceNextParams{Recurrence: notes.Recurrence,
				Timer: protocol.Timer{Kind: notes.Recurrence, Recurrence: notes.Recurrence, Due: fired}, Now: fired}, &res))
			assert.Equal(t, fired.AddDate(0, 0, 1), res.Next.UTC(), "without a payload, daily at the time it was due")
			res = protocol.RecurrenceNextResult{}
			require.NoError(t, s.c.Call(ctx, "recurrence.next", protocol.RecurrenceNextParams{Recurrence: notes.Recurrence,
				Timer: protocol.Timer{Payload: json.RawMessage(`{"at":"25:99"}`)}, Now: now}, &res))
			assert.True(t, res.Next.IsZero(), "an unreadable time of day ends the recurrence")

			dry := configure(2, 2)
			dry.DryRun = true
			require.NoError(t, s.c.Call(ctx, "configure", dry, nil))
			require.NoError(t, s.c.Call(ctx, "task.run", protocol.TaskRunParams{Task: notes.TaskDigestArm, Now: now}, &task))
			assert.Len(t, armed, 1, "a dry run arms nothing")
		})
	}
}

func TestCheck(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			s := startRelease(t, m, 3)
			var res protocol.CheckRunResult
			require.NoError(t, s.c.Call(ctx, "check.run", protocol.CheckRunParams{Check: notes.CheckStores}, &res))
			assert.Equal(t, protocol.CheckWarn, res.Status, "the store does not exist yet")
			assert.Equal(t, "notes_store_unreadable", res.Code)
			require.Len(t, res.Items, 1)
			assert.Contains(t, res.Items[0], filepath.Join(s.stateDir, "inbox"))

			require.NoError(t, os.MkdirAll(s.store.Dir, 0o755))
			require.NoError(t, s.c.Call(ctx, "check.run", protocol.CheckRunParams{Check: notes.CheckStores}, &res))
			assert.Equal(t, protocol.CheckOK, res.Status)
			assert.Equal(t, "1 note stores readable", res.Detail)
		})
	}
}

func TestConfigureRefusals(t *testing.T) {
	ctx := testContext(t)
	c, err := sdk.Attach(notes.Extension(), sdktest.New())
	require.NoError(t, err)
	require.NoError(t, c.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}}, nil))
	for config, why := range map[string]string{
		`{"dir":"relative"}`:                  "no state directory to read a relative store under",
		`{"dir":"/abs","digest":"9 o'clock"}`: "a digest time that is not HH:MM",
		`{"dir":7}`:                           "a config of the wrong shape",
	} {
		err := c.Call(ctx, "configure", protocol.ConfigureParams{Entries: []protocol.ConfigEntry{{ScopeID: "team", ID: "inbox",
			Type: notes.Name, Config: json.RawMessage(config)}}, KV: protocol.KVLayout{Stored: 2, Declared: 2}}, nil)
		assert.ErrorIs(t, err, protocol.ErrInvalid, why)
	}
}
