package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/open-conduit/open-conduit/runtime"
)

// storeChangePages reads the whole change log after after, a page of limit
// at a time.
func storeChangePages(ctx context.Context, s runtime.Store, after int64, limit int) ([]runtime.Change, error) {
	var all []runtime.Change
	for {
		page, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.Change, error) { return tx.Changes(after, limit) })
		if err != nil {
			return nil, err
		}
		if len(page) > limit {
			return nil, fmt.Errorf("page of %d changes exceeds limit %d", len(page), limit)
		}
		if len(page) == 0 {
			return all, nil
		}
		all = append(all, page...)
		after = page[len(page)-1].Seq
	}
}

func changeSeqs(cs []runtime.Change) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.Seq
	}
	return out
}

// checkChangeLog: every accepted Event and every stored Work revision
// logs one Change, in commit order, read back page by page; a replay or a
// rolled-back write logs nothing.
func checkChangeLog(ctx context.Context, s runtime.Store) error {
	latest, err := storeView(ctx, s, func(tx runtime.ReadTx) (int64, error) { return tx.LatestChange() })
	if err != nil || latest != 0 {
		return fmt.Errorf("an empty store's latest change is %d (%v), want 0", latest, err)
	}
	var first, second runtime.Event
	var work runtime.Work
	err = s.Transact(ctx, func(tx runtime.Tx) error {
		env := storeSampleEnvelope("c-1")
		env.ScopeID = "scope-a"
		if first, _, err = tx.AcceptEvent(env); err != nil {
			return err
		}
		if work, err = tx.PutWork(runtime.Work{ID: "w-c", ScopeID: "scope-a", Kind: "k", State: runtime.WorkPending}); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("first writes: %w", err)
	}
	err = s.Transact(ctx, func(tx runtime.Tx) error {
		// A replay of an accepted identity is no change.
		env := storeSampleEnvelope("c-1")
		env.ScopeID = "scope-a"
		if _, added, err := tx.AcceptEvent(env); err != nil || added {
			return fmt.Errorf("replay: added=%v err=%v", added, err)
		}
		env = storeSampleEnvelope("c-2")
		env.ScopeID = "scope-b"
		if second, _, err = tx.AcceptEvent(env); err != nil {
			return err
		}
		work.State = runtime.WorkRunning
		work, err = tx.PutWork(work)
		return err
	})
	if err != nil {
		return fmt.Errorf("second writes: %w", err)
	}
	errRollback := errors.New("roll back")
	err = s.Transact(ctx, func(tx runtime.Tx) error {
		if _, _, err := tx.AcceptEvent(storeSampleEnvelope("c-rolled-back")); err != nil {
			return err
		}
		w := work
		w.State = runtime.WorkDone
		if _, err := tx.PutWork(w); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		return fmt.Errorf("a rolled-back transaction returned %v", err)
	}

	want := []runtime.Change{
		{Kind: runtime.ChangeEvent, ID: first.ID, ScopeID: "scope-a", Sequence: first.Sequence},
		{Kind: runtime.ChangeWork, ID: "w-c", ScopeID: "scope-a", State: runtime.WorkPending, Revision: 1},
		{Kind: runtime.ChangeEvent, ID: second.ID, ScopeID: "scope-b", Sequence: second.Sequence},
		{Kind: runtime.ChangeWork, ID: "w-c", ScopeID: "scope-a", State: runtime.WorkRunning, Revision: 2},
	}
	// Pages of 1 and of 3 cross page boundaries at different places.
	for _, limit := range []int{1, 3, 100} {
		got, err := storeChangePages(ctx, s, 0, limit)
		if err != nil {
			return fmt.Errorf("paging the change log by %d: %w", limit, err)
		}
		if len(got) != len(want) {
			return fmt.Errorf("paging by %d: %d changes, want %d (one per accepted event and stored work revision, none for a replay or a rollback): %+v",
				limit, len(got), len(want), got)
		}
		if err := storeIncreasing(changeSeqs(got)); err != nil {
			return fmt.Errorf("paging by %d: %w", limit, err)
		}
		for i, c := range got {
			w := want[i]
			if c.Kind != w.Kind || c.ID != w.ID || c.ScopeID != w.ScopeID || c.Sequence != w.Sequence ||
				c.State != w.State || c.Revision != w.Revision {
				return fmt.Errorf("paging by %d: change %d is %+v, want %+v", limit, i, c, w)
			}
			if c.At.IsZero() {
				return fmt.Errorf("change %d has no time", i)
			}
		}
		if limit == 100 {
			latest, err := storeView(ctx, s, func(tx runtime.ReadTx) (int64, error) { return tx.LatestChange() })
			if err != nil || latest != got[len(got)-1].Seq {
				return fmt.Errorf("latest change %d (%v), want %d", latest, err, got[len(got)-1].Seq)
			}
			rest, err := storeChangePages(ctx, s, got[1].Seq, 100)
			if err != nil || len(rest) != 2 || rest[0].Seq != got[2].Seq {
				return fmt.Errorf("resuming after change %d read %+v (%v), want the last two", got[1].Seq, rest, err)
			}
		}
	}
	if _, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.Change, error) { return tx.Changes(-1, 10) }); !errors.Is(err, runtime.ErrInvalid) {
		return fmt.Errorf("a negative change cursor: %v, want ErrInvalid", err)
	}
	return nil
}

// checkChangesUnderWriters: a reader that pages the change log while
// writers commit, resuming each time from the last Seq it saw, sees every
// change exactly once — the promise a resumable change stream rests on.
func checkChangesUnderWriters(ctx context.Context, s runtime.Store) error {
	const writers, perWriter = 4, 25
	seen, err := pageUnderWriters(ctx, s, writers, perWriter, 5,
		func(tx runtime.Tx, w, i int) error {
			env := storeSampleEnvelope(fmt.Sprintf("cw%d-%d", w, i))
			env.ScopeID = "scope-a"
			ev, _, err := tx.AcceptEvent(env)
			if err != nil {
				return err
			}
			_, err = tx.PutWork(runtime.Work{ID: "w-" + ev.ID, ScopeID: "scope-a", Kind: "k", State: runtime.WorkPending})
			return err
		},
		func(tx runtime.ReadTx, after int64, limit int) ([]int64, error) {
			page, err := tx.Changes(after, limit)
			return changeSeqs(page), err
		})
	if err != nil {
		return err
	}
	if err := storeIncreasing(seen); err != nil {
		return fmt.Errorf("a change cursor repeated or reordered changes: %w", err)
	}
	all, err := storeChangePages(ctx, s, 0, 1000)
	if err != nil {
		return err
	}
	if len(all) != 2*writers*perWriter {
		return fmt.Errorf("the change log holds %d changes, want %d", len(all), 2*writers*perWriter)
	}
	if len(seen) != len(all) {
		return fmt.Errorf("a reader resuming from its last change saw %d of %d: a change became visible behind its cursor",
			len(seen), len(all))
	}
	return nil
}

// checkActiveWaits: ActiveWaits pages exactly the active Waits, by Work
// ID, resuming after a Work ID.
func checkActiveWaits(ctx context.Context, s runtime.Store) error {
	for _, w := range []runtime.Wait{
		{ID: "wait-c", WorkID: "w-c", State: runtime.WaitActive, Description: "third"},
		{ID: "wait-a", WorkID: "w-a", State: runtime.WaitActive, Description: "first"},
		{ID: "wait-b-old", WorkID: "w-b", State: runtime.WaitSatisfied},
		{ID: "wait-b", WorkID: "w-b", State: runtime.WaitActive, Description: "second"},
		{ID: "wait-d", WorkID: "w-d", State: runtime.WaitExpired},
	} {
		if _, err := storePutWait(ctx, s, w); err != nil {
			return fmt.Errorf("put %s: %w", w.ID, err)
		}
	}
	var ids []string
	after := ""
	for range 10 {
		page, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.Wait, error) { return tx.ActiveWaits(after, 2) })
		if err != nil {
			return fmt.Errorf("ActiveWaits(%q, 2): %w", after, err)
		}
		if len(page) > 2 {
			return fmt.Errorf("ActiveWaits returned %d waits over the limit 2", len(page))
		}
		if len(page) == 0 {
			break
		}
		for _, w := range page {
			if w.State != runtime.WaitActive {
				return fmt.Errorf("ActiveWaits listed %s in state %s", w.ID, w.State)
			}
			ids = append(ids, w.ID)
		}
		after = page[len(page)-1].WorkID
	}
	if want := []string{"wait-a", "wait-b", "wait-c"}; !slices.Equal(ids, want) {
		return fmt.Errorf("ActiveWaits paged %v, want %v (the active waits by work ID)", ids, want)
	}
	return nil
}
