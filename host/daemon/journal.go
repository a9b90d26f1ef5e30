package daemon

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/runtime"
)

// The journal is the change stream's second source: what happens to the
// packages' processes (supervision) and to Executions, which the store's
// change log does not record. Each change is numbered (Journal, from 1
// for this daemon process) and placed after the change log's Seq that
// was latest when it happened, so the stream merges both in one order
// and a cursor (Seq, Journal) resumes it exactly. It is memory only: the
// last client.JournalSize changes of this process.
type journal struct {
	mu      sync.Mutex
	entries []client.Change // oldest first, at most client.JournalSize
	last    int64           // the last Journal number given
	n       *changeNotifier
}

func newJournal(n *changeNotifier) *journal { return &journal{n: n} }

// add numbers c, keeps it and wakes the streams. Its Seq is raised to
// the last kept change's, so the journal's Seqs never go down: a change
// whose Seq was read before another's commit is placed after it.
func (j *journal) add(c client.Change) {
	j.mu.Lock()
	j.last++
	c.Journal = j.last
	if n := len(j.entries); n > 0 && c.Seq < j.entries[n-1].Seq {
		c.Seq = j.entries[n-1].Seq
	}
	if len(j.entries) == client.JournalSize {
		copy(j.entries, j.entries[1:])
		j.entries = j.entries[:len(j.entries)-1]
	}
	j.entries = append(j.entries, c)
	j.mu.Unlock()
	j.n.notify()
}

// latest is the last Journal number given, 0 if none.
func (j *journal) latest() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last
}

// after returns the kept changes numbered after afterJournal, oldest
// first.
func (j *journal) after(afterJournal int64) []client.Change {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.entries) == 0 {
		return nil
	}
	// Numbers are consecutive: the first to return is at a known index.
	i := max(afterJournal-j.entries[0].Journal+1, 0)
	if i >= int64(len(j.entries)) {
		return nil
	}
	return slices.Clone(j.entries[i:])
}

// before is the cursor of a stream that starts after the log's change
// seq with no journal cursor: the last change placed before seq (0 if
// none), so the stream reads every journal change placed at seq or later.
func (j *journal) before(seq int64) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	cursor := int64(0)
	if len(j.entries) > 0 {
		cursor = j.entries[0].Journal - 1 // the dropped ones are before any cursor
	}
	for _, c := range j.entries {
		if c.Seq >= seq {
			break
		}
		cursor = c.Journal
	}
	return cursor
}

// latestSeq is the change log's last Seq now (0 when it cannot be read:
// the change is placed first, which a resuming client still sees).
func latestSeq(ctx context.Context, s runtime.Store) int64 {
	seq, err := view(ctx, s, func(tx runtime.ReadTx) (int64, error) { return tx.LatestChange() })
	if err != nil {
		return 0
	}
	return seq
}

// watchProcess journals each state of proc (with its PID and restarts)
// as it changes, until proc is closed. A transition faster than the
// watcher may be merged into the next, but restarts counts every crash,
// so a restart is never lost.
func (d *Daemon) watchProcess(name string, proc *host.Process) {
	var last client.PackageChange
	for first := true; ; first = false {
		ready := proc.Ready()
		st, restarts, err := proc.Status()
		pc := client.PackageChange{Name: name, State: packageState(st), Restarts: restarts, PID: proc.PID()}
		if err != nil {
			pc.LastError = err.Error()
		}
		if first || pc.State != last.State || pc.Restarts != last.Restarts || pc.PID != last.PID {
			last = pc
			pc.At = time.Now().UTC()
			d.journal.add(client.Change{Seq: latestSeq(context.Background(), d.store), Kind: client.ChangePackage, Package: &pc})
		}
		if st == host.Closed {
			return
		}
		<-ready
	}
}

// journalingTx notes each Execution written in its transaction, for the
// journal once the transaction commits.
type journalingTx struct {
	runtime.Tx
	written []client.Change
}

func (t *journalingTx) PutExecution(x runtime.Execution) (runtime.Execution, error) {
	x, err := t.Tx.PutExecution(x)
	if err != nil {
		return x, err
	}
	t.note(x)
	return x, nil
}

// note records x as written by this transaction.
func (t *journalingTx) note(x runtime.Execution) {
	xc := client.ExecutionChange{ID: x.ID, WorkID: x.WorkID, Attempt: x.Attempt, Executor: x.Executor, Epoch: x.Epoch,
		State: string(x.State), Error: x.Error, At: x.UpdatedAt}
	if w, err := t.Work(x.WorkID); err == nil {
		xc.ScopeID = w.ScopeID
	}
	seq, _ := t.LatestChange()
	t.written = append(t.written, client.Change{Seq: seq, Kind: client.ChangeExecution, Execution: &xc})
}
