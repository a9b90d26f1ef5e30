package notes_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// releaseDir is a package directory holding release n's manifest, as an
// operator's install of that release would.
func releaseDir(t *testing.T, n int) string {
	if n == 3 {
		return "."
	}
	raw, err := os.ReadFile(filepath.Join("releases", "release"+strconv.Itoa(n)+".json"))
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), notes.Name)
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, protocol.ManifestFile), raw, 0o644))
	return dir
}

func kvGet(t *testing.T, st runtime.Store, ns, key string) (json.RawMessage, bool) {
	var value json.RawMessage
	var found bool
	require.NoError(t, st.View(context.Background(), func(tx runtime.ReadTx) error {
		e, ok, err := tx.KVGet(ns, key)
		value, found = e.Value, ok
		return err
	}))
	return value, found
}

// TestHostedUpgradeAndDowngrade runs the releases under the real host on
// one store: release 1 writes KV layout 0, release 3 migrates it to 2 and
// reads a v1 payload through its upcasters, and release 2 is then refused
// by the host before it starts (kv_downgrade). On a store it never
// migrated, release 2 reads a v3 payload as newer: the host answers no
// match without asking it.
func TestHostedUpgradeAndDowngrade(t *testing.T) {
	ctx := testContext(t)
	st := openStore(t)
	storeDir := t.TempDir()
	params := entryIn("team", storeDir)

	p1, err := notesProcess(t, st, releaseDir(t, 1), 1, params)
	require.NoError(t, err)
	require.NoError(t, p1.Start(ctx))
	out, err := host.NewRemote(p1).Operations()[notes.OpAdd].Operation.Handle(ctx, runtime.Call{Operation: notes.OpAdd,
		RequestID: "req-1", Authority: runtime.Authority{ScopeID: "team"}, Input: json.RawMessage(`{"title":"kept"}`)})
	require.NoError(t, err)
	var added notes.AddOutput
	require.NoError(t, json.Unmarshal(out, &added))
	_, found := kvGet(t, st, notes.NamespaceLegacy, added.Note)
	require.True(t, found, "release 1 keeps KV layout 0")
	require.NoError(t, p1.Close(ctx))

	p3, err := notesProcess(t, st, releaseDir(t, 3), 3, params)
	require.NoError(t, err)
	require.NoError(t, p3.Start(ctx))
	_, found = kvGet(t, st, notes.NamespaceLegacy, added.Note)
	assert.False(t, found, "migrated away")
	_, found = kvGet(t, st, notes.NamespaceIndex, "note/"+added.Note)
	assert.True(t, found, "migrated to layout 2")
	layout, _ := kvGet(t, st, host.KVLayoutNamespace, notes.Name)
	assert.JSONEq(t, "2", string(layout), "the host recorded the new layout")

	v1 := runtime.Event{Envelope: runtime.Envelope{Source: notes.SourceName("team", "inbox"), DeliveryID: "old", ScopeID: "team",
		Family: notes.FamilyNote, Schema: "notes.note.v1", Payload: json.RawMessage(`{"id":"old","text":"Stored by release 1\nbody"}`)}, Sequence: 1}
	d, err := host.NewRemote(p3).RouteHandler(notes.Name).Match(ctx, runtime.RouteInput{ScopeID: "team", Route: runtime.Route{Handler: notes.Name}, Event: v1})
	require.NoError(t, err)
	assert.True(t, d.Match, d.Reason)
	require.NotNil(t, d.Display)
	assert.Equal(t, "Stored by release 1", d.Display.Title, "release 3 reads the v1 payload upcast")
	require.NoError(t, p3.Close(ctx))

	p2, err := notesProcess(t, st, releaseDir(t, 2), 2, params)
	require.NoError(t, err)
	err = p2.Start(ctx)
	assert.ErrorIs(t, err, host.ErrRefused)
	assert.ErrorIs(t, err, protocol.ErrKVDowngrade, "an older release after a migration is refused")

	fresh, err := notesProcess(t, openStore(t), releaseDir(t, 2), 2, params)
	require.NoError(t, err)
	require.NoError(t, fresh.Start(ctx))
	remote := host.NewRemote(fresh)
	v3 := v1
	v3.Schema, v3.Payload = "notes.note.v3", json.RawMessage(`{"id":"new","title":"Written by release 3","tags":[]}`)
	for range 2 {
		d, err = remote.RouteHandler(notes.Name).Match(ctx, runtime.RouteInput{ScopeID: "team", Route: runtime.Route{Handler: notes.Name}, Event: v3})
		require.NoError(t, err)
		assert.False(t, d.Match, "a newer payload never matches")
	}
	assert.Equal(t, int64(2), remote.SchemaSkips(), "answered by the host's gate, the same way each time")
}

// weakened returns notes with one handler replaced, for the suites'
// negative controls.
func weakened(change func(ext *sdk.Extension)) *sdk.Extension {
	ext := notes.Extension()
	change(ext)
	return ext
}

func attachWeakened(t *testing.T, ctx context.Context, ext *sdk.Extension, params protocol.ConfigureParams) host.Conn {
	svc := host.NewService(host.ServiceConfig{Manifest: manifestOf(t, ext.Manifest), Store: openStore(t)})
	c, err := sdk.Attach(ext, svc)
	require.NoError(t, err)
	att, err := host.Attach(ctx, c, svc, t.TempDir(), params)
	require.NoError(t, err)
	return att
}

// TestSuitesCatchWeakenedNotes: the suites that pass notes fail a notes
// whose add forgets the request ID (a second note after a lost commit)
// and one whose reconcile keeps a delivery ID across revisions.
func TestSuitesCatchWeakenedNotes(t *testing.T) {
	ctx := testContext(t)
	forgetful := weakened(func(ext *sdk.Extension) {
		op := ext.Operations[notes.OpAdd]
		inner := op.Handler
		op.Handler = func(ctx context.Context, h *sdk.Host, p protocol.OperationCallParams) (protocol.OperationCallResult, error) {
			p.RequestID = ""
			return inner(ctx, h, p)
		}
		ext.Operations[notes.OpAdd] = op
	})
	err := conformance.CheckToolbelt(ctx, conformance.ToolbeltDriver{
		New: func(ctx context.Context) (conformance.ToolbeltTarget, error) {
			store := notes.Store{Dir: t.TempDir()}
			spec := host.NewRemote(attachWeakened(t, ctx, forgetful, entryIn(conformance.ToolbeltScope, store.Dir))).Operations()[notes.OpAdd]
			return conformance.ToolbeltTarget{Name: notes.OpAdd, Operation: spec.Operation, Owner: spec.Owner, Input: json.RawMessage(`{"title":"x"}`),
				Effects: func(ctx context.Context) (int, error) { ids, err := store.IDs(); return len(ids), err }}, nil
		},
		NewStore: func() (runtime.Store, error) { return sqlite.Open(t.TempDir()) },
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "replay_window")

	stuck := weakened(func(ext *sdk.Extension) {
		in := ext.Ingress[notes.Name]
		inner := in.Reconcile
		in.Reconcile = func(ctx context.Context, h *sdk.Host, p protocol.IngressReconcileParams) (protocol.IngressReconcileResult, error) {
			res, err := inner(ctx, h, p)
			for i := range res.Observations {
				res.Observations[i].Event.DeliveryID = res.Observations[i].Item
			}
			return res, err
		}
		ext.Ingress[notes.Name] = in
	})
	source := notes.SourceName("conformance", "inbox")
	err = conformance.CheckIngress(ctx, conformance.IngressDriver{
		Name: source,
		NewSource: func(ctx context.Context, items []conformance.IngressItem) (runtime.IngressSource, error) {
			store := notes.Store{Dir: t.TempDir()}
			for _, r := range records(items) {
				if err := store.Put(r); err != nil {
					return nil, err
				}
			}
			decl := protocol.SourceDecl{Name: source, ScopeID: "conformance", Families: []string{notes.FamilyNote}, Reconcile: true}
			return host.NewRemote(attachWeakened(t, ctx, stuck, entryIn("conformance", store.Dir))).Ingress(decl, notes.Name, "inbox"), nil
		},
		NewStore: func() (runtime.Store, error) { return sqlite.Open(t.TempDir()) },
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "version_mints_identity")
	assert.False(t, errors.Is(err, context.DeadlineExceeded))
}

// TestHostedPublishCommitsRecord calls notes.publish through the engine's
// toolbelt, hosted both ways: the Event is accepted and the record
// emit.commit gives is written in the same transaction, naming the
// accepted Event; a retry with the request ID replays it.
func TestHostedPublishCommitsRecord(t *testing.T) {
	for _, h := range hostings {
		t.Run(h.name, func(t *testing.T) {
			ctx := testContext(t)
			st := openStore(t)
			require.NoError(t, st.Transact(ctx, func(tx runtime.Tx) error {
				if _, err := tx.PutScope(runtime.Scope{ID: "team", Name: "team"}); err != nil {
					return err
				}
				_, err := tx.PutWork(runtime.Work{ID: "work-1", ScopeID: "team", Kind: notes.WorkKind, State: runtime.WorkRunning})
				return err
			}))
			conn := h.start(t, ctx, st, entryIn("team", t.TempDir()))
			e, err := runtime.New(runtime.Config{Store: st, Operations: host.NewRemote(conn).Operations()})
			require.NoError(t, err)
			defer e.Close()
			auth := runtime.Authority{ScopeID: "team", WorkID: "work-1", ExecutionID: "x-1", Operations: []string{notes.OpPublish}}
			out, err := e.Call(ctx, auth, notes.OpPublish, "req-1", json.RawMessage(`{"title":"Shipped"}`))
			require.NoError(t, err)
			again, err := e.Call(ctx, auth, notes.OpPublish, "req-1", json.RawMessage(`{"title":"Shipped"}`))
			require.NoError(t, err)
			assert.JSONEq(t, string(out), string(again))

			var published notes.AddOutput
			require.NoError(t, json.Unmarshal(out, &published))
			raw, found := kvGet(t, st, notes.NamespacePublished, published.Note)
			require.True(t, found, "the record committed with the Event")
			var rec notes.PublishedRecord
			require.NoError(t, json.Unmarshal(raw, &rec))
			var ev runtime.Event
			require.NoError(t, st.View(ctx, func(r runtime.ReadTx) error {
				ev, err = r.Event(rec.Event)
				return err
			}))
			assert.Equal(t, notes.FamilyPublished, ev.Family)
			assert.Equal(t, ev.Sequence, rec.Sequence, "the record names the accepted Event")
			assert.Equal(t, ev.Root, rec.Root)
			var n int64
			require.NoError(t, st.View(ctx, func(r runtime.ReadTx) error {
				n, err = r.LatestSequence()
				return err
			}))
			assert.Equal(t, int64(1), n, "one Event for the call and its retry")
		})
	}
}

// TestHostedDigest arms the digest timer through the host's task.run and
// timer.arm, and asks the host's recurrence adapter for the next firing.
func TestHostedDigest(t *testing.T) {
	for _, h := range hostings {
		t.Run(h.name, func(t *testing.T) {
			ctx := testContext(t)
			st := openStore(t)
			require.NoError(t, st.Transact(ctx, func(tx runtime.Tx) error {
				_, err := tx.PutScope(runtime.Scope{ID: "team", Name: "team"})
				return err
			}))
			params := entryIn("team", t.TempDir())
			var cfg map[string]string
			require.NoError(t, json.Unmarshal(params.Entries[0].Config, &cfg))
			cfg["digest"] = "07:15"
			params.Entries[0].Config, _ = json.Marshal(cfg)
			remote := host.NewRemote(h.start(t, ctx, st, params))
			require.NoError(t, remote.Task().Run(ctx, notes.TaskDigestArm))
			var timers []runtime.Timer
			require.NoError(t, st.View(ctx, func(r runtime.ReadTx) error {
				var err error
				timers, err = r.DueTimers(time.Now().Add(48*time.Hour), 10)
				return err
			}))
			require.Len(t, timers, 1)
			due := timers[0].Due.UTC()
			assert.Equal(t, notes.Recurrence, timers[0].Kind)
			assert.Equal(t, [2]int{7, 15}, [2]int{due.Hour(), due.Minute()})

			next, err := remote.Recurrence(notes.Recurrence).Next(timers[0], due)
			require.NoError(t, err)
			assert.Equal(t, due.AddDate(0, 0, 1), next.Due.UTC(), "daily, at the time the digest's payload names")
		})
	}
}
