package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/runtime"
)

// changeNotifier wakes whoever waits for the store's next commit. It is a
// broadcast without loss: a waiter takes Changed() before it reads, so a
// commit between its read and its wait still wakes it.
type changeNotifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// Changed returns a channel closed at the next notify after the call.
func (n *changeNotifier) Changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *changeNotifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

// notifyingStore is a Store that notifies after every write transaction.
// The daemon gives the engine and the host this store, so every write
// wakes the change stream. A failed transaction notifies too: a spurious
// wake-up costs one empty read, a missed one would stall a stream.
//
// It also journals every Execution a committed transaction wrote
// (journal.go).
type notifyingStore struct {
	runtime.Store
	n       *changeNotifier
	journal *journal
}

func newNotifyingStore(s runtime.Store) notifyingStore {
	n := &changeNotifier{}
	return notifyingStore{Store: s, n: n, journal: newJournal(n)}
}

func (s notifyingStore) Transact(ctx context.Context, fn func(runtime.Tx) error) error {
	return s.journaled(ctx, s.Store.Transact, fn)
}

// journaled runs fn through transact, then notifies, and journals the
// Executions it wrote once it committed.
func (s notifyingStore) journaled(ctx context.Context, transact func(context.Context, func(runtime.Tx) error) error, fn func(runtime.Tx) error) error {
	defer s.n.notify()
	var jt *journalingTx
	err := transact(ctx, func(tx runtime.Tx) error {
		jt = &journalingTx{Tx: tx} // a retried fn starts with none
		return fn(wrapTx(tx, jt))
	})
	if err == nil && jt != nil {
		for _, c := range jt.written {
			s.journal.add(c)
		}
	}
	return err
}

// Changed returns a channel closed at the next write after the call.
func (s notifyingStore) Changed() <-chan struct{} { return s.n.Changed() }

// journaled is a backend whose journal the stream merges (the Daemon).
type journaled interface{ changeJournal() *journal }

// changes serves the change stream: server-sent events, one per Change in
// (Seq, Journal) order, each with "id: <seq>" (or "<seq>.<journal>" for a
// journal change) so a client resumes with ?after=<seq>&after_journal=N or
// the standard Last-Event-ID header and misses nothing. It reads the
// durable change log, so a change committed while no client listened is
// still delivered, and the daemon's journal (journal.go), which keeps
// this process's last client.JournalSize package and Execution changes.
func (a *api) changes(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	after, err := queryInt(q, "after")
	if err != nil {
		return err
	}
	afterJournal, err := queryInt(q, "after_journal")
	if err != nil {
		return err
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		seq, jn, ok := parseChangeID(last)
		if !ok {
			return client.Errorf(client.CodeInvalidRequest, "Last-Event-ID %q is not a change sequence", clipForMessage(last))
		}
		after, afterJournal = seq, jn
	}
	var jl *journal
	if jb, ok := a.b.(journaled); ok {
		jl = jb.changeJournal()
	}
	if jl != nil && afterJournal > jl.latest() {
		return client.Errorf(client.CodeConflict, "after_journal=%d is beyond the last journal change %d of this daemon process", afterJournal, jl.latest())
	}
	if jl != nil && afterJournal == 0 {
		// From here on the journal is read by its numbers alone, so a
		// change placed late (at a Seq already passed) is still sent.
		afterJournal = jl.before(after)
	}
	scope, scoped := q.Get("scope"), q.Has("scope")
	flusher, canFlush := w.(http.Flusher)
	if !canFlush {
		return errors.New("the response writer cannot stream")
	}
	store := a.b.Store()
	latest, err := view(r.Context(), store, func(tx runtime.ReadTx) (int64, error) { return tx.LatestChange() })
	if err != nil {
		return err
	}
	if after > latest {
		return client.Errorf(client.CodeConflict, "after=%d is beyond the last change %d of this daemon's log", after, latest)
	}

	a.watchShutdown(r)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()

	send := func(c client.Change) bool {
		if c.Journal > 0 {
			afterJournal = c.Journal
			// A change placed at a Seq this stream has passed goes
			// where the stream is: the order a client checks holds.
			c.Seq = max(c.Seq, after)
		}
		if scoped && changeScope(c) != scope {
			return true
		}
		return writeChange(w, c) == nil
	}
	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	for {
		changed := a.b.Changed()
		// The journal first: each of its changes names a Seq committed
		// before it, which the page read next then holds.
		var pending []client.Change
		if jl != nil {
			pending = jl.after(afterJournal)
		}
		page, err := view(r.Context(), store, func(tx runtime.ReadTx) ([]client.Change, error) {
			return readChanges(tx, after, streamPage)
		})
		if err != nil {
			if r.Context().Err() == nil {
				a.b.Logger().Error("management API: change stream", "after", after, "err", err)
			}
			return nil // the status is sent; ending the stream is the only refusal left
		}
		for _, c := range page {
			for len(pending) > 0 && pending[0].Seq < c.Seq {
				if !send(pending[0]) {
					return nil // the client left
				}
				pending = pending[1:]
			}
			after = c.Seq
			if !send(c) {
				return nil
			}
		}
		if len(page) < streamPage {
			// The log is read to its end: every journal change left is
			// placed at or before it.
			for _, c := range pending {
				if !send(c) {
					return nil
				}
			}
		}
		flusher.Flush()
		if len(page) == streamPage {
			continue
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-a.closing:
			return nil
		case <-changed:
		case <-keepAlive.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
			flusher.Flush()
		}
	}
}

// parseChangeID reads a stream id: "<seq>" or "<seq>.<journal>".
func parseChangeID(id string) (seq, journal int64, ok bool) {
	s, j, dotted := strings.Cut(id, ".")
	seq, err := strconv.ParseInt(s, 10, 64)
	if err != nil || seq < 0 {
		return 0, 0, false
	}
	if dotted {
		if journal, err = strconv.ParseInt(j, 10, 64); err != nil || journal < 1 {
			return 0, 0, false
		}
	}
	return seq, journal, true
}

// readChanges reads a page of the change log as the stream's Changes: an
// Event change carries the (immutable) Event, a Work change the Work's
// state and revision as of the change.
func readChanges(tx runtime.ReadTx, after int64, limit int) ([]client.Change, error) {
	page, err := tx.Changes(after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]client.Change, 0, len(page))
	for _, c := range page {
		wc := client.Change{Seq: c.Seq, Kind: string(c.Kind)}
		switch c.Kind {
		case runtime.ChangeEvent:
			ev, err := tx.Event(c.ID)
			if err != nil {
				return nil, fmt.Errorf("change %d names event %q: %w", c.Seq, c.ID, err)
			}
			e := wireEvent(ev)
			wc.Event = &e
		case runtime.ChangeWork:
			wc.Work = &client.Work{ID: c.ID, ScopeID: c.ScopeID, State: string(c.State), Revision: c.Revision, UpdatedAt: c.At}
			wc.WorkChange = client.WorkUpdated
			if c.Revision == 1 {
				wc.WorkChange = client.WorkCreated
			}
		}
		// A kind this build does not know crosses with its Seq and kind
		// only, so a cursor still moves past it.
		out = append(out, wc)
	}
	return out, nil
}

func changeScope(c client.Change) string {
	switch {
	case c.Event != nil:
		return c.Event.ScopeID
	case c.Work != nil:
		return c.Work.ScopeID
	case c.Execution != nil:
		return c.Execution.ScopeID
	}
	return ""
}

func writeChange(w http.ResponseWriter, c client.Change) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	id := strconv.FormatInt(c.Seq, 10)
	if c.Journal > 0 {
		id += "." + strconv.FormatInt(c.Journal, 10)
	}
	_, err = fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", id, c.Kind, data)
	return err
}
