package daemon

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/runtime"
)

// openJournalDaemon opens a daemon with the API on, runner installed and
// runnerConfig applied, and its client.
func openJournalDaemon(t *testing.T, ctx context.Context, cfgDir, state string) (*Daemon, *client.Client) {
	t.Helper()
	d, err := Open(ctx, Options{ConfigDir: cfgDir, StateDir: state, Executable: openConduitBinary(t), ShutdownGrace: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close(context.WithoutCancel(ctx)) })
	return d, client.New(SocketPath(state))
}

// latestChange is the log's last Seq, through the API.
func latestChange(t *testing.T, ctx context.Context, c *client.Client) int64 {
	t.Helper()
	page, err := c.Events(ctx, client.EventQuery{Limit: 1})
	require.NoError(t, err)
	return page.LatestChange
}

// TestChangeStreamCarriesPackagesAndExecutions: on the stream, a Work's
// first change says created; its Execution's start is an execution
// change with its attempt and epoch; a SIGKILL of the executor's package
// shows as package changes up to its restart with a new PID, which a
// client that opens the stream afterwards from before the kill still
// reads; a resume with both cursors repeats nothing; a cursor beyond the
// journal is refused; and the next daemon's adoption of the run is an
// execution change at a later epoch. Each wait fails (at its deadline)
// when the daemon does not emit its kind.
func TestChangeStreamCarriesPackagesAndExecutions(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfgDir, state := runnerDirs(t, runnerConfig)
	d, c := openJournalDaemon(t, ctx, cfgDir, state)

	wait := func(what string, q client.ChangeQuery, cond func(client.Change) bool) client.Change {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		ch, err := c.WaitFor(wctx, q, cond)
		require.NoError(t, err, "the stream shows %s", what)
		return ch
	}

	// A Work and its Execution.
	mark := latestChange(t, ctx, c)
	require.NoError(t, d.Store().Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutWork(runtime.Work{ID: "w1", ScopeID: "home", Kind: "job", Binding: bindingName("home", "jobs"), State: runtime.WorkPending})
		return err
	}))
	_, err := d.Engine().StartPending(ctx)
	require.NoError(t, err)
	created := wait("the Work created", client.ChangeQuery{After: mark}, func(ch client.Change) bool {
		return ch.Work != nil && ch.Work.ID == "w1"
	})
	assert.Equal(t, client.WorkCreated, created.WorkChange)
	x := execution(t, d, "w1")
	started := wait("the Execution started", client.ChangeQuery{After: mark, Scope: "home"}, func(ch client.Change) bool {
		return ch.Execution != nil && ch.Execution.WorkID == "w1" && ch.Execution.State == string(runtime.ExecutionRunning)
	})
	assert.Equal(t, client.ChangeExecution, started.Kind)
	assert.Equal(t, x.ID, started.Execution.ID)
	assert.Equal(t, 1, started.Execution.Attempt)
	assert.Equal(t, x.Epoch, started.Execution.Epoch)
	assert.Equal(t, "home", started.Execution.ScopeID)
	assert.Positive(t, started.Journal)

	// The executor's package killed and restarted.
	before := latestChange(t, ctx, c)
	st, err := c.Status(ctx)
	require.NoError(t, err)
	var runner client.Package
	for _, p := range st.Packages {
		if p.Name == "runner" {
			runner = p
		}
	}
	require.Positive(t, runner.PID)
	require.NoError(t, syscall.Kill(-runner.PID, syscall.SIGKILL))
	restarted := func(ch client.Change) bool {
		return ch.Package != nil && ch.Package.Name == "runner" && ch.Package.State == "ready" &&
			ch.Package.Restarts > runner.Restarts && ch.Package.PID != runner.PID
	}
	back := wait("the package restarted", client.ChangeQuery{After: before}, restarted)
	assert.Equal(t, client.ChangePackage, back.Kind)
	assert.Positive(t, back.Package.PID)

	// Read afterwards, from before the kill: the crash and the restart
	// are there, in order.
	stream, err := c.Changes(ctx, client.ChangeQuery{After: before})
	require.NoError(t, err)
	var states []string
	for {
		ch, err := stream.Next()
		require.NoError(t, err)
		if ch.Package != nil && ch.Package.Name == "runner" {
			states = append(states, ch.Package.State)
		}
		if restarted(ch) {
			break
		}
	}
	stream.Close()
	assert.Contains(t, states, "restarting", "the crash itself is a change: %v", states)

	// Resumed with both cursors, nothing is repeated.
	stream, err = c.Changes(ctx, client.ChangeQuery{After: back.Seq, AfterJournal: back.Journal})
	require.NoError(t, err)
	require.NoError(t, d.Store().Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutWork(runtime.Work{ID: "w2", ScopeID: "home", Kind: "job", Binding: bindingName("home", "jobs"), State: runtime.WorkDone})
		return err
	}))
	for {
		ch, err := stream.Next()
		require.NoError(t, err)
		assert.False(t, ch.Journal != 0 && ch.Journal <= back.Journal, "journal change %d repeated", ch.Journal)
		if ch.Work != nil && ch.Work.ID == "w2" {
			break
		}
	}
	stream.Close()
	_, err = c.Changes(ctx, client.ChangeQuery{AfterJournal: back.Journal + 1000})
	assert.Equal(t, client.CodeConflict, client.CodeOf(err), "a journal cursor beyond this daemon's: %v", err)

	// The next daemon adopts the run at a new epoch.
	require.NoError(t, d.Close(ctx))
	d, c = openJournalDaemon(t, ctx, cfgDir, state)
	adopted := wait("the Execution adopted", client.ChangeQuery{}, func(ch client.Change) bool {
		return ch.Execution != nil && ch.Execution.ID == x.ID && ch.Execution.Epoch > x.Epoch
	})
	assert.Equal(t, 1, adopted.Execution.Attempt)
	require.NoError(t, d.Engine().Inject(ctx, x.ID, json.RawMessage(`"0\n"`)))
	wait("the Execution ended", client.ChangeQuery{}, func(ch client.Change) bool {
		return ch.Execution != nil && ch.Execution.ID == x.ID && ch.Execution.State == string(runtime.ExecutionSucceeded)
	})
}

// TestJournalOrderAndCursors: a change whose Seq was read before another
// change's is placed after it (Seqs never go down); after reads by
// number, also once the oldest are dropped; before is the cursor of a
// stream that starts at a Seq.
func TestJournalOrderAndCursors(t *testing.T) {
	j := newJournal(&changeNotifier{})
	j.add(client.Change{Seq: 3, Kind: client.ChangePackage})
	j.add(client.Change{Seq: 5, Kind: client.ChangeExecution})
	j.add(client.Change{Seq: 4, Kind: client.ChangePackage}) // read before 5 committed
	got := j.after(0)
	require.Len(t, got, 3)
	assert.Equal(t, []int64{3, 5, 5}, []int64{got[0].Seq, got[1].Seq, got[2].Seq})
	assert.Equal(t, []int64{1, 2, 3}, []int64{got[0].Journal, got[1].Journal, got[2].Journal})
	assert.Len(t, j.after(2), 1)
	assert.Empty(t, j.after(3))
	assert.Equal(t, int64(0), j.before(3), "a change at the cursor's Seq comes after it")
	assert.Equal(t, int64(1), j.before(4))
	assert.Equal(t, int64(3), j.before(6))

	for i := range client.JournalSize {
		j.add(client.Change{Seq: int64(10 + i)})
	}
	assert.Equal(t, int64(3+client.JournalSize), j.latest())
	kept := j.after(0)
	require.Len(t, kept, client.JournalSize, "the oldest are dropped")
	assert.Equal(t, int64(4), kept[0].Journal)
	assert.Len(t, j.after(j.latest()-2), 2)
	assert.Equal(t, int64(3), j.before(0), "a cursor before the kept changes starts at the first kept")
}
