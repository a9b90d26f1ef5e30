//go:build faultinject

package daemon

import (
	"context"
	"fmt"
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
