package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// persistingExecutor's runs persist their recovery metadata once, as
// BenchmarkEngineRatios's parked executor does, and never end.
type persistingExecutor struct{}

func (persistingExecutor) Run(ctx context.Context, req runtime.RunRequest) (runtime.RunHandle, error) {
	if err := req.PersistRecovery(ctx, json.RawMessage(`{"run":"`+req.ExecutionID+`"}`)); err != nil {
		return nil, err
	}
	return parkedRun{}, nil
}

func (persistingExecutor) Recover(context.Context, runtime.RecoverRequest) (runtime.RunHandle, error) {
	return parkedRun{}, nil
}

type parkedRun struct{}

func (parkedRun) Wait(ctx context.Context) (runtime.RunResult, error) {
	<-ctx.Done()
	return runtime.RunResult{}, ctx.Err()
}

// measureStart is what one Execution start (StartPending over one pending
// Work, its executor persisting once) and one bare synced Work write cost
// the store, on a store that has run starts before (so every statement is
// prepared and the tables are not empty).
func measureStart(t *testing.T) (start, write sqlite.WriteCost) {
	t.Helper()
	ctx := t.Context()
	s := openStore(t, t.TempDir())
	e, err := runtime.New(runtime.Config{
		Store:     s,
		Bindings:  map[string]runtime.Binding{"b": {Executor: "parked"}},
		Executors: map[string]runtime.Executor{"parked": persistingExecutor{}},
		Pools:     map[string]int{runtime.PoolJob: 1 << 30},
		OnError:   func(err error) { t.Error(err) },
	})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	put := func(w runtime.Work) (runtime.Work, error) {
		err := s.Transact(ctx, func(tx runtime.Tx) error {
			var err error
			w, err = tx.PutWork(w)
			return err
		})
		return w, err
	}
	startOne := func(i int) error {
		if _, err := put(runtime.Work{ID: fmt.Sprint("w", i), ScopeID: "s1", Kind: "task", Binding: "b", State: runtime.WorkPending}); err != nil {
			return err
		}
		xs, err := e.StartPending(ctx)
		if err == nil && len(xs) != 1 {
			err = fmt.Errorf("started %d", len(xs))
		}
		return err
	}
	for i := range 5 { // warm: statements prepared, tables past their first page
		require.NoError(t, startOne(i))
	}
	written, err := put(runtime.Work{ID: "bare", ScopeID: "s1", Kind: "task", Binding: "none", State: runtime.WorkDone})
	require.NoError(t, err)
	for range 3 {
		written, err = put(written)
		require.NoError(t, err)
	}
	// A deferred flush landing inside a measurement would add its
	// commit: measure again (a new Work) until none did.
	for try := range 5 {
		_, err := put(runtime.Work{ID: fmt.Sprint("measured", try), ScopeID: "s1", Kind: "task", Binding: "b", State: runtime.WorkPending})
		require.NoError(t, err)
		require.NoError(t, s.Sync(ctx))
		start, err = sqlite.MeasureWrites(ctx, s, func() error {
			xs, err := e.StartPending(ctx)
			if err == nil && len(xs) != 1 {
				err = fmt.Errorf("started %d", len(xs))
			}
			return err
		})
		require.NoError(t, err)
		if !s.Unsynced() {
			continue // the flush ran inside: its frames were counted
		}
		require.NoError(t, s.Sync(ctx))
		write, err = sqlite.MeasureWrites(ctx, s, func() error {
			written, err = put(written)
			return err
		})
		require.NoError(t, err)
		return start, write
	}
	t.Fatal("every measurement met a deferred flush")
	return
}

// An Execution start costs the store 8 statements and 8 pages (WAL
// frames) over two transactions (the synced start, which reads the page of
// startable Work and claims one, and the deferred mark with the run's
// metadata), beside a bare Work write's 4 and 5. It was 20 statements and
// 13 pages over three: the start read the pending page in a read-only
// snapshot (cold after every write) and a retry timer per Work, read the
// Work and the Execution it was about to write, put the whole Work
// (rewriting its scope index) and its keys to change its state, read the
// lease it had just written, wrote an unchanged input cursor, and marked
// the run by reading and putting the Execution; leases and executions each
// wrote a rowid table and its key's index, and an Execution's update
// rewrote its Work index entry. Then 9: the earlier attempts and the input
// cursor were two reads (PriorAttempts).
func TestExecutionStartCost(t *testing.T) {
	start, write := measureStart(t)
	show := func(c sqlite.WriteCost) string { return strings.Join(c.Statements, "\n") }
	assert.LessOrEqual(t, len(start.Statements), 8, "statements per start:\n%s", show(start))
	assert.LessOrEqual(t, start.Frames, 8, "pages per start")
	// An UPDATE with RETURNING costs SQLite a temporary table and a
	// statement journal, about as much again as the update: of the
	// start's writes, only the lease's takes one (its epoch is known
	// only to the statement that moves it on).
	var returning []string
	for _, q := range start.Statements {
		if strings.Contains(q, "RETURNING") {
			returning = append(returning, q)
		}
	}
	assert.Equal(t, 1, len(returning), "statements with RETURNING per start:\n%s", strings.Join(returning, "\n"))
	// The baseline is measured, not assumed: a write that costs nothing
	// would be a broken measurement.
	assert.NotEmpty(t, write.Statements, "statements per bare write")
	assert.Positive(t, write.Frames, "pages per bare write")
	t.Logf("start: %d statements, %d pages; bare write: %d statements, %d pages",
		len(start.Statements), start.Frames, len(write.Statements), write.Frames)
}
