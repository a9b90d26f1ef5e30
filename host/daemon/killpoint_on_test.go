//go:build faultinject

package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// Run with: go test -tags faultinject ./host/daemon -run TestKillingStore
//
// Each durable step passes its two points, once per transaction, in order
// (".before" inside the transaction, ".after" once it committed), and a
// step that wrote nothing new (a repeated acceptance, a failed write)
// passes none.
func TestKillingStorePassesEachStepsPoints(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	s := killStore(st)
	var passed []string
	orig := killSelf
	killSelf = func(name string) { passed = append(passed, name) }
	t.Cleanup(func() {
		// Disarmed, so the package's other tests pass every point alive.
		armed.mu.Lock()
		armed.on = false
		armed.mu.Unlock()
		killSelf = orig
	})
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutScope(runtime.Scope{ID: "team"})
		return err
	}))
	env := runtime.Envelope{Source: "notes/team/inbox", DeliveryID: "d1", ScopeID: "team", Family: "notes.note", Type: "note",
		Schema: "notes.note.v1", Payload: []byte(`{}`)}
	accept := func(tx runtime.Tx) error { _, _, err := tx.AcceptEvent(env); return err }
	results := 0
	steps := []struct {
		name  string
		point string
		fn    func(tx runtime.Tx) error
	}{
		{"a new Event", "event.accept", accept},
		{"the same Event again: nothing new", "", accept},
		{"a tool result", "result.commit", func(tx runtime.Tx) error {
			results++ // a new request ID each time: the first commit of one wins
			_, _, err := tx.PutToolResult(runtime.ToolResult{RequestID: fmt.Sprint("r", results), Operation: "notes.op", Result: []byte(`{}`)})
			return err
		}},
		{"an extension's KV batch", "kv.batch", func(tx runtime.Tx) error {
			return tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "notes", Key: "k", Value: []byte(`1`)}}})
		}},
		{"the host's KV layout", "kv.layout", func(tx runtime.Tx) error {
			return tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: host.KVLayoutNamespace, Key: "notes", Value: []byte(`2`)}}})
		}},
		{"a lease", "lease.write", func(tx runtime.Tx) error {
			_, err := tx.AcquireLease(runtime.LeaseRequest{Name: "l1", Holder: "daemon", Now: now, TTL: time.Minute})
			return err
		}},
	}
	for _, step := range steps {
		for _, arm := range []string{"before", "after"} {
			if step.point == "" {
				continue
			}
			name := step.point + "." + arm
			require.NoError(t, armKillPoint([]string{KillPointEnv + "=" + name}))
			passed = nil
			require.NoError(t, s.Transact(ctx, step.fn), step.name)
			assert.Equal(t, []string{name}, passed, "%s passes %s", step.name, name)
			if step.point == "event.accept" {
				break // the same Event twice is the next step
			}
		}
		if step.point == "" {
			require.NoError(t, armKillPoint([]string{KillPointEnv + "=" + KillEventAcceptAfter}))
			passed = nil
			require.NoError(t, s.Transact(ctx, step.fn), step.name)
			assert.Empty(t, passed, step.name)
		}
	}
	// A transaction that fails passes no ".after" point.
	require.NoError(t, armKillPoint([]string{KillPointEnv + "=" + KillKVBatchAfter}))
	passed = nil
	require.Error(t, s.Transact(ctx, func(tx runtime.Tx) error {
		if err := tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "notes", Key: "k2", Value: []byte(`1`)}}}); err != nil {
			return err
		}
		return context.Canceled
	}))
	assert.Empty(t, passed)
}

// An arm's @SUBJECT counts only the hits of steps that touched it, and
// the engine's own KV (core.*) is no extension's batch: a drill names the
// one KV batch, layout, result or lease it means among everything a
// daemon writes, and the Nth hit is the Nth of that subject.
func TestKillingStoreCountsAnArmsSubjectOnly(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	s := killStore(st)
	var passed []string
	orig := killSelf
	killSelf = func(name string) { passed = append(passed, name) }
	t.Cleanup(func() {
		armed.mu.Lock()
		armed.on = false
		armed.mu.Unlock()
		killSelf = orig
	})
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(ns, key string) func(tx runtime.Tx) error {
		return func(tx runtime.Tx) error {
			return tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: ns, Key: key, Value: []byte(`1`)}}})
		}
	}
	del := func(ns, key string) func(tx runtime.Tx) error {
		return func(tx runtime.Tx) error {
			return tx.KVCommit(runtime.KVBatch{Deletes: []runtime.KVKey{{Namespace: ns, Key: key}}})
		}
	}
	result := func(op, id string) func(tx runtime.Tx) error {
		return func(tx runtime.Tx) error {
			_, _, err := tx.PutToolResult(runtime.ToolResult{RequestID: id, Operation: op, Result: []byte(`{}`)})
			return err
		}
	}
	lease := func(name string) func(tx runtime.Tx) error {
		return func(tx runtime.Tx) error {
			_, err := tx.AcquireLease(runtime.LeaseRequest{Name: name, Holder: "daemon", Now: now, TTL: time.Minute, Supersede: true})
			return err
		}
	}
	cases := []struct {
		arm   string
		steps []func(tx runtime.Tx) error
		// killed is the index of the step whose transaction passes the
		// armed point, -1 for none.
		killed int
	}{
		{"kv.batch.before@notes.index", []func(runtime.Tx) error{put("notes", "a"), put(runtime.NamespaceScheduler, "c"), put("notes.index", "b")}, 2},
		{"kv.batch.after@notes.index:2", []func(runtime.Tx) error{put("notes.index", "a"), put("notes", "a"), del("notes.index", "a")}, 2},
		{"kv.batch.before", []func(runtime.Tx) error{put(runtime.NamespaceScheduler, "c"), put(runtime.NamespaceRouting, "r"), put("notes", "x")}, 2},
		{"kv.batch.before@core.scheduler", []func(runtime.Tx) error{put(runtime.NamespaceScheduler, "c")}, -1},
		{"kv.layout.before@notes", []func(runtime.Tx) error{put(host.KVLayoutNamespace, "runner"), put(host.KVLayoutNamespace, "notes")}, 1},
		{"result.commit.after@notes.add", []func(runtime.Tx) error{result("notes.publish", "r1"), result("notes.add", "r2")}, 1},
		{"lease.write.before@work/w2", []func(runtime.Tx) error{lease("work/w1"), lease("work/w2")}, 1},
	}
	for _, tc := range cases {
		require.NoError(t, armKillPoint([]string{KillPointEnv + "=" + tc.arm}), tc.arm)
		point, _, _ := strings.Cut(tc.arm, "@")
		for i, step := range tc.steps {
			passed = nil
			require.NoError(t, s.Transact(ctx, step), "%s, step %d", tc.arm, i)
			if i == tc.killed {
				assert.Equal(t, []string{point}, passed, "%s: step %d passes the point", tc.arm, i)
			} else {
				assert.Empty(t, passed, "%s: step %d passes nothing armed", tc.arm, i)
			}
		}
	}
}
