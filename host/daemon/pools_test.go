package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

// settings.job_concurrency caps the runs of the runner (an executor of
// pool "jobs") at once, and settings.concurrency does not: the runner's
// runs count against the job pool. The third Work starts once a running
// one has ended.
func TestJobConcurrencyCapsTheRunnersRuns(t *testing.T) {
	for _, c := range []struct {
		settings string
		started  int
	}{
		{`{"job_concurrency": 2, "concurrency": 1}`, 2},
		{`{"job_concurrency": 1, "concurrency": 3}`, 1},
		{`{"pools": {"job": 3}, "job_concurrency": 1}`, 1}, // job_concurrency wins
	} {
		t.Run(c.settings, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			doc := fmt.Sprintf(`{"scopes": [{"id": "home", "bindings": [{"name": "jobs", "executor": "runner"}]}], "settings": %s}`, c.settings)
			cfgDir, state := runnerDirs(t, doc)
			d := openRunnerDaemon(t, cfgDir, state)
			defer d.Close(context.WithoutCancel(ctx))

			require.NoError(t, d.Store().Transact(ctx, func(tx runtime.Tx) error {
				for _, id := range []string{"w1", "w2", "w3"} {
					if _, err := tx.PutWork(runtime.Work{ID: id, ScopeID: "home", Kind: "job", Binding: bindingName("home", "jobs"), State: runtime.WorkPending}); err != nil {
						return err
					}
				}
				return nil
			}))
			started, err := d.Engine().StartPending(ctx)
			require.NoError(t, err)
			require.Len(t, started, c.started)
			assert.Equal(t, c.started, d.Engine().Running(runtime.PoolJob), "the runner's runs count against the job pool")
			assert.Zero(t, d.Engine().Running(runtime.PoolAgent))
			more, err := d.Engine().StartPending(ctx)
			require.NoError(t, err)
			assert.Empty(t, more, "the pool is full")

			// One run ends (its default job exits with the injected
			// status); its slot starts the next Work.
			require.NoError(t, d.Engine().Inject(ctx, started[0].ID, json.RawMessage(`"0\n"`)))
			waitSettled(t, d, started[0].WorkID)
			next, err := d.Engine().StartPending(ctx)
			require.NoError(t, err)
			assert.Len(t, next, 1)
			for _, x := range append(started[1:], next...) {
				require.NoError(t, d.Engine().Inject(ctx, x.ID, json.RawMessage(`"0\n"`)))
			}
			d.Engine().Drain()
		})
	}
}

// waitSettled waits on the store's change notifications until the Work
// has ended.
func waitSettled(t *testing.T, d *Daemon, workID string) {
	t.Helper()
	for {
		changed := d.Changed()
		var w runtime.Work
		require.NoError(t, d.Store().View(t.Context(), func(r runtime.ReadTx) error {
			var err error
			w, err = r.Work(workID)
			return err
		}))
		if w.State.Terminal() {
			require.Equal(t, runtime.WorkDone, w.State)
			return
		}
		select {
		case <-changed:
		case <-t.Context().Done():
			t.Fatal("the work never ended")
		}
	}
}

// A negative concurrency is refused at its path; zero (absent) is the
// default.
func TestConcurrencySettingsAreChecked(t *testing.T) {
	cfg, ds := ParseConfig([]byte(`{"settings": {"concurrency": -1, "job_concurrency": -2}}`))
	require.Empty(t, ds)
	ds = checkStatic(cfg, testCatalogue(t))
	require.Len(t, ds, 2)
	assert.Equal(t, "$.settings.concurrency", ds[0].Path)
	assert.Equal(t, RuleInvalidPool, ds[0].Rule)
	assert.Equal(t, "$.settings.job_concurrency", ds[1].Path)

	cfg, ds = ParseConfig([]byte(`{"settings": {"concurrency": 2, "job_concurrency": 5}}`))
	require.Empty(t, ds)
	assert.Empty(t, checkStatic(cfg, testCatalogue(t)))
	pools := map[string]int{runtime.PoolJob: 9, "gpu": 1}
	applyConcurrency(pools, cfg.Settings)
	assert.Equal(t, map[string]int{runtime.PoolAgent: 2, runtime.PoolJob: 5, "gpu": 1}, pools)
}
