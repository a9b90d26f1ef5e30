package sqlite_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// PriorAttempts' one read finds what Executions and KVGet find: the
// number of the Work's Executions, the last one's (by attempt, then ID)
// state and metadata, and the KV entry, for Work with no attempt, with
// attempts in every order of writing, with another Work's beside it, and
// with and without the entry (an empty value included).
func TestPriorAttemptsAgreesWithExecutionsAndKVGet(t *testing.T) {
	type attempt struct {
		id       string
		work     string
		n        int
		state    runtime.ExecutionState
		recovery string
	}
	cases := map[string]struct {
		attempts []attempt
		entry    *string
	}{
		"nothing":      {},
		"one starting": {attempts: []attempt{{"x-1", "w-1", 1, runtime.ExecutionStarting, ""}}},
		"last succeeded": {attempts: []attempt{
			{"x-1", "w-1", 1, runtime.ExecutionFailed, `{"a":1}`},
			{"x-2", "w-1", 2, runtime.ExecutionSucceeded, `{"a":2}`}}},
		"written out of order": {attempts: []attempt{
			{"x-9", "w-1", 3, runtime.ExecutionSucceeded, `{"a":3}`},
			{"x-1", "w-1", 1, runtime.ExecutionFailed, `{"a":1}`},
			{"x-5", "w-1", 2, runtime.ExecutionStopped, ``}}},
		"attempts past nine": {attempts: []attempt{
			{"x-1", "w-1", 9, runtime.ExecutionFailed, `{"a":9}`},
			{"x-2", "w-1", 10, runtime.ExecutionSucceeded, `{"a":10}`}}},
		"one attempt number twice": {attempts: []attempt{
			{"x-b", "w-1", 1, runtime.ExecutionSucceeded, `{"b":1}`},
			{"x-a", "w-1", 1, runtime.ExecutionFailed, `{"a":1}`}}},
		"another Work's": {attempts: []attempt{
			{"x-1", "w-1", 1, runtime.ExecutionFailed, ``},
			{"x-2", "w-2", 7, runtime.ExecutionSucceeded, `{"other":true}`}},
			entry: ptr(`41`)},
		"an entry":          {entry: ptr(`41`)},
		"an empty entry":    {entry: ptr(``)},
		"entry and attempt": {attempts: []attempt{{"x-1", "w-1", 1, runtime.ExecutionSucceeded, `{}`}}, entry: ptr(`7`)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := fixedStore(t)
			ctx := t.Context()
			require.NoError(t, s.Transact(ctx, func(tx runtime.Tx) error {
				for _, a := range c.attempts {
					l, err := tx.AcquireLease(runtime.LeaseRequest{Name: "work/" + a.id, Holder: "h", Now: leaseT0, TTL: 1e9})
					if err != nil {
						return err
					}
					if _, err := tx.PutExecution(runtime.Execution{ID: a.id, WorkID: a.work, Attempt: a.n, Lease: l.Name,
						Epoch: l.Epoch, State: a.state, Recovery: json.RawMessage(a.recovery)}); err != nil {
						return err
					}
				}
				if c.entry != nil {
					return tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "scheduler", Key: "inputs\x00w-1", Value: []byte(*c.entry)}}})
				}
				return nil
			}))
			require.NoError(t, s.Transact(ctx, func(r runtime.Tx) error {
				got, err := r.(runtime.StartTx).PriorAttempts("w-1", "scheduler", "inputs\x00w-1")
				require.NoError(t, err)
				prev, err := r.Executions("w-1")
				require.NoError(t, err)
				want := runtime.PriorAttempts{Executions: len(prev)}
				if len(prev) > 0 {
					want.LastState, want.LastRecovery = prev[len(prev)-1].State, prev[len(prev)-1].Recovery
				}
				want.Entry, want.Found, err = r.KVGet("scheduler", "inputs\x00w-1")
				require.NoError(t, err)
				assert.Equal(t, want, got)
				return nil
			}))
		})
	}
}

func ptr(s string) *string { return &s }

// The read seeks the executions' index by Work and the KV key, never
// scanning a table, sorting or building a temporary table.
func TestPriorAttemptsSeeksItsIndexes(t *testing.T) {
	dir := t.TempDir()
	openStore(t, dir)
	joined := queryPlan(t, rawDB(t, dir), sqlite.PriorAttemptsQuery, "scheduler", []byte("k"), "w")
	assert.Contains(t, joined, "SEARCH executions USING INDEX executions_by_work (work_id=?)", joined)
	assert.Contains(t, joined, "SEARCH kv USING PRIMARY KEY (namespace=? AND key=?)", joined)
	assert.NotContains(t, joined, "SCAN", joined)
	assert.NotContains(t, joined, "TEMP B-TREE", joined)
	assert.NotContains(t, joined, "MATERIALIZE", joined)
}
