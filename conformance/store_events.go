package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/runtime"
)

func storeSampleEnvelope(delivery string) runtime.Envelope {
	return runtime.Envelope{
		Source:     "ingress.sample",
		DeliveryID: delivery,
		ScopeID:    "scope-a",
		Family:     "sample",
		Type:       "sample.created",
		Schema:     "sample.item.v1",
		Payload:    json.RawMessage(`{"id":7,"title":"first","tags":["x","y"],"ratio":1.5}`),
		OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC),
	}
}

func storeSameEvent(got, want runtime.Event) error {
	switch {
	case got.ID != want.ID, got.Sequence != want.Sequence, got.Source != want.Source,
		got.DeliveryID != want.DeliveryID, got.ScopeID != want.ScopeID, got.Family != want.Family,
		got.Type != want.Type, got.Schema != want.Schema, got.Parent != want.Parent,
		got.Root != want.Root, got.Depth != want.Depth, got.Signature != want.Signature,
		!bytes.Equal(got.Payload, want.Payload), !slices.Equal(got.Works, want.Works),
		!got.OccurredAt.Equal(want.OccurredAt):
		return fmt.Errorf("event read back as %+v, want %+v", got, want)
	}
	return nil
}

func checkAcceptAndRead(ctx context.Context, s runtime.Store) error {
	if seq, err := storeLatest(ctx, s); err != nil || seq != 0 {
		return fmt.Errorf("empty store: LatestSequence = %d, %v; want 0, nil", seq, err)
	}
	env := storeSampleEnvelope("d-1")
	ev, added, err := storeAccept(ctx, s, env)
	if err != nil || !added {
		return fmt.Errorf("first acceptance: added=%v err=%v; want added", added, err)
	}
	if ev.ID == "" || ev.Sequence <= 0 || ev.Signature == "" {
		return fmt.Errorf("accepted event lacks ID, sequence or signature: %+v", ev)
	}
	if ev.Root != ev.ID || ev.Depth != 0 {
		return fmt.Errorf("a root event must be its own root at depth 0, got root %q depth %d", ev.Root, ev.Depth)
	}
	if want := runtime.DefaultEventID(env.Source, env.DeliveryID); ev.ID != want {
		return fmt.Errorf("event without an ID is named %q, want DefaultEventID %q", ev.ID, want)
	}
	if !bytes.Equal(ev.Payload, env.Payload) {
		return fmt.Errorf("payload stored as %s, want verbatim %s", ev.Payload, env.Payload)
	}
	byID, err := storeView(ctx, s, func(tx runtime.ReadTx) (runtime.Event, error) { return tx.Event(ev.ID) })
	if err != nil {
		return fmt.Errorf("Event(%q): %w", ev.ID, err)
	}
	if err := storeSameEvent(byID, ev); err != nil {
		return fmt.Errorf("by ID: %w", err)
	}
	byDelivery, err := storeView(ctx, s, func(tx runtime.ReadTx) (runtime.Event, error) {
		return tx.EventByDelivery(env.Source, env.DeliveryID)
	})
	if err != nil {
		return fmt.Errorf("EventByDelivery: %w", err)
	}
	if err := storeSameEvent(byDelivery, ev); err != nil {
		return fmt.Errorf("by delivery: %w", err)
	}
	if seq, err := storeLatest(ctx, s); err != nil || seq != ev.Sequence {
		return fmt.Errorf("LatestSequence = %d, %v; want %d", seq, err, ev.Sequence)
	}
	_, err = storeView(ctx, s, func(tx runtime.ReadTx) (runtime.Event, error) { return tx.Event("no-such-event") })
	if err := storeWantIs(err, runtime.ErrNotFound, "Event of an unknown ID"); err != nil {
		return err
	}
	named := storeSampleEnvelope("d-2")
	named.ID = "custom-id"
	ev2, _, err := storeAccept(ctx, s, named)
	if err != nil || ev2.ID != "custom-id" {
		return fmt.Errorf("an envelope naming its ID: got %q, %v; want custom-id", ev2.ID, err)
	}
	return nil
}

func checkAcceptIdempotent(ctx context.Context, s runtime.Store) error {
	env := storeSampleEnvelope("d-1")
	first, _, err := storeAccept(ctx, s, env)
	if err != nil {
		return err
	}
	// The same content spelled differently: keys reordered, whitespace,
	// escapes and number spellings changed.
	again := env
	again.Payload = json.RawMessage(`{ "ratio": 15e-1, "tags": ["\u0078", "y"], "title": "first", "id": 7.0 }`)
	again.OccurredAt = env.OccurredAt.In(time.FixedZone("X", 3600))
	for i, e := range []runtime.Envelope{env, again} {
		ev, added, err := storeAccept(ctx, s, e)
		if err != nil {
			return fmt.Errorf("re-acceptance %d of the same content: %w", i, err)
		}
		if added {
			return fmt.Errorf("re-acceptance %d of the same content reported added", i)
		}
		if err := storeSameEvent(ev, first); err != nil {
			return fmt.Errorf("re-acceptance %d must return the stored event: %w", i, err)
		}
	}
	if seq, err := storeLatest(ctx, s); err != nil || seq != first.Sequence {
		return fmt.Errorf("after re-acceptance LatestSequence = %d, %v; want %d", seq, err, first.Sequence)
	}
	return nil
}

func checkAcceptIdentityConflict(ctx context.Context, s runtime.Store) error {
	env := storeSampleEnvelope("d-1")
	first, _, err := storeAccept(ctx, s, env)
	if err != nil {
		return err
	}
	changes := map[string]func(*runtime.Envelope){
		"payload":     func(e *runtime.Envelope) { e.Payload = json.RawMessage(`{"id":8}`) },
		"scope":       func(e *runtime.Envelope) { e.ScopeID = "scope-b" },
		"type":        func(e *runtime.Envelope) { e.Type = "sample.deleted" },
		"schema":      func(e *runtime.Envelope) { e.Schema = "sample.item.v2" },
		"occurred_at": func(e *runtime.Envelope) { e.OccurredAt = e.OccurredAt.Add(time.Second) },
		"works":       func(e *runtime.Envelope) { e.Works = []string{"w-1"} },
		"explicit_id": func(e *runtime.Envelope) { e.ID = "another-id" },
	}
	for _, name := range slices.Sorted(maps.Keys(changes)) {
		changed := env
		changes[name](&changed)
		// The transaction commits even though acceptance failed: a
		// refused acceptance must have written nothing.
		var acceptErr error
		err := s.Transact(ctx, func(tx runtime.Tx) error {
			_, _, acceptErr = tx.AcceptEvent(changed)
			return nil
		})
		if err != nil {
			return fmt.Errorf("changed %s: transaction: %w", name, err)
		}
		if err := storeWantIs(acceptErr, runtime.ErrConflict, "same identity with a changed "+name); err != nil {
			return err
		}
	}
	stored, err := storeView(ctx, s, func(tx runtime.ReadTx) (runtime.Event, error) { return tx.Event(first.ID) })
	if err != nil {
		return err
	}
	if err := storeSameEvent(stored, first); err != nil {
		return fmt.Errorf("a conflicting acceptance changed the stored event: %w", err)
	}
	if seq, err := storeLatest(ctx, s); err != nil || seq != first.Sequence {
		return fmt.Errorf("conflicting acceptances moved LatestSequence to %d (%v), want %d", seq, err, first.Sequence)
	}
	// An explicit ID that already names another identity conflicts too.
	other := storeSampleEnvelope("d-2")
	other.ID = first.ID
	_, _, err = storeAccept(ctx, s, other)
	return storeWantIs(err, runtime.ErrConflict, "a new identity reusing an accepted event's ID")
}

func checkAcceptConcurrent(ctx context.Context, s runtime.Store) error {
	const n = 16
	env := storeSampleEnvelope("d-concurrent")
	type result struct {
		ev    runtime.Event
		added bool
		err   error
	}
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ev, added, err := storeAccept(ctx, s, env)
			results[i] = result{ev, added, err}
		}()
	}
	close(start)
	wg.Wait()
	added := 0
	for i, r := range results {
		if r.err != nil {
			return fmt.Errorf("concurrent acceptance %d: %w", i, r.err)
		}
		if r.added {
			added++
		}
		if r.ev.ID != results[0].ev.ID || r.ev.Sequence != results[0].ev.Sequence {
			return fmt.Errorf("concurrent acceptances returned different events: %s@%d and %s@%d",
				r.ev.ID, r.ev.Sequence, results[0].ev.ID, results[0].ev.Sequence)
		}
	}
	if added != 1 {
		return fmt.Errorf("%d of %d concurrent acceptances of one envelope reported added, want exactly 1", added, n)
	}
	all, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.Event, error) { return tx.Events(0, 100) })
	if err != nil {
		return err
	}
	if len(all) != 1 {
		return fmt.Errorf("the log holds %d events after concurrent acceptance of one envelope, want 1", len(all))
	}
	return nil
}

func checkSequenceOrder(ctx context.Context, s runtime.Store) error {
	var accepted []runtime.Event
	for i := range 5 {
		ev, _, err := storeAccept(ctx, s, storeSampleEnvelope(fmt.Sprintf("single-%d", i)))
		if err != nil {
			return err
		}
		accepted = append(accepted, ev)
	}
	err := s.Transact(ctx, func(tx runtime.Tx) error {
		for i := range 5 {
			ev, _, err := tx.AcceptEvent(storeSampleEnvelope(fmt.Sprintf("batch-%d", i)))
			if err != nil {
				return err
			}
			accepted = append(accepted, ev)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// A rolled-back acceptance takes no place in the log.
	rollback := errors.New("roll back")
	err = s.Transact(ctx, func(tx runtime.Tx) error {
		if _, _, err := tx.AcceptEvent(storeSampleEnvelope("rolled-back")); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		return fmt.Errorf("Transact must return fn's error, got %v", err)
	}
	ev, _, err := storeAccept(ctx, s, storeSampleEnvelope("after-rollback"))
	if err != nil {
		return err
	}
	accepted = append(accepted, ev)
	if err := storeIncreasing(storeSequences(accepted)); err != nil {
		return fmt.Errorf("acceptance order: %w", err)
	}
	all, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.Event, error) { return tx.Events(0, 100) })
	if err != nil {
		return err
	}
	if !slices.Equal(storeSequences(all), storeSequences(accepted)) {
		return fmt.Errorf("Events lists sequences %v, want those accepted %v", storeSequences(all), storeSequences(accepted))
	}
	if _, err := storeView(ctx, s, func(tx runtime.ReadTx) (runtime.Event, error) {
		return tx.EventByDelivery("ingress.sample", "rolled-back")
	}); !errors.Is(err, runtime.ErrNotFound) {
		return fmt.Errorf("a rolled-back acceptance is readable (err %v)", err)
	}
	if seq, err := storeLatest(ctx, s); err != nil || seq != ev.Sequence {
		return fmt.Errorf("LatestSequence = %d, %v; want %d", seq, err, ev.Sequence)
	}
	return nil
}

func checkCausalChain(ctx context.Context, s runtime.Store) error {
	root, _, err := storeAccept(ctx, s, storeSampleEnvelope("root"))
	if err != nil {
		return err
	}
	childEnv := storeSampleEnvelope("child")
	childEnv.Parent = root.ID
	child, _, err := storeAccept(ctx, s, childEnv)
	if err != nil {
		return err
	}
	grandEnv := storeSampleEnvelope("grandchild")
	grandEnv.Parent = child.ID
	grand, _, err := storeAccept(ctx, s, grandEnv)
	if err != nil {
		return err
	}
	if child.Root != root.ID || child.Depth != 1 || grand.Root != root.ID || grand.Depth != 2 {
		return fmt.Errorf("chain root/depth: child %q/%d, grandchild %q/%d; want %q/1 and %q/2",
			child.Root, child.Depth, grand.Root, grand.Depth, root.ID, root.ID)
	}
	orphan := storeSampleEnvelope("orphan")
	orphan.Parent = "no-such-event"
	if _, _, err := storeAccept(ctx, s, orphan); !errors.Is(err, runtime.ErrInvalid) {
		return fmt.Errorf("a parent that was never accepted: got %v, want ErrInvalid", err)
	}
	foreign := storeSampleEnvelope("foreign")
	foreign.ScopeID = "scope-b"
	foreign.Parent = root.ID
	if _, _, err := storeAccept(ctx, s, foreign); !errors.Is(err, runtime.ErrInvalid) {
		return fmt.Errorf("a parent in another scope: got %v, want ErrInvalid", err)
	}
	return nil
}

func checkScopeIsolation(ctx context.Context, s runtime.Store) error {
	want := map[string][]int64{}
	err := s.Transact(ctx, func(tx runtime.Tx) error {
		for i := range 30 {
			env := storeSampleEnvelope(fmt.Sprintf("d-%d", i))
			env.ScopeID = []string{"scope-a", "scope-b", "scope-b", ""}[i%4]
			ev, _, err := tx.AcceptEvent(env)
			if err != nil {
				return err
			}
			want[env.ScopeID] = append(want[env.ScopeID], ev.Sequence)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, scope := range []string{"scope-a", "scope-b", "", "scope-none"} {
		for _, limit := range []int{1, 3, 100} {
			got, err := storePageAll(ctx, s, limit, func(tx runtime.ReadTx, after int64, limit int) ([]runtime.Event, error) {
				return tx.ScopeEvents(scope, after, limit)
			})
			if err != nil {
				return fmt.Errorf("ScopeEvents(%q): %w", scope, err)
			}
			for _, e := range got {
				if e.ScopeID != scope {
					return fmt.Errorf("ScopeEvents(%q) returned event %s of scope %q", scope, e.ID, e.ScopeID)
				}
			}
			if !slices.Equal(storeSequences(got), want[scope]) {
				return fmt.Errorf("ScopeEvents(%q) by pages of %d: sequences %v, want %v", scope, limit, storeSequences(got), want[scope])
			}
		}
	}
	// A page is filtered by scope before its limit: a full page comes back
	// even when other scopes' events sit between the scope's own.
	page, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.Event, error) { return tx.ScopeEvents("scope-a", 0, 5) })
	if err != nil {
		return err
	}
	if len(page) != 5 {
		return fmt.Errorf("ScopeEvents(scope-a, 0, 5) returned %d events, want 5", len(page))
	}
	return nil
}

func checkCursorUnderWriters(ctx context.Context, s runtime.Store) error {
	const writers, perWriter = 4, 30
	seen, err := pageUnderWriters(ctx, s, writers, perWriter, 7,
		func(tx runtime.Tx, w, i int) error {
			for j, scope := range []string{"scope-a", "scope-b"} {
				env := storeSampleEnvelope(fmt.Sprintf("w%d-%d-%d", w, i, j))
				env.ScopeID = scope
				if _, _, err := tx.AcceptEvent(env); err != nil {
					return err
				}
			}
			return nil
		},
		func(tx runtime.ReadTx, after int64, limit int) ([]int64, error) {
			page, err := tx.ScopeEvents("scope-a", after, limit)
			if err != nil {
				return nil, err
			}
			for _, e := range page {
				if e.ScopeID != "scope-a" {
					return nil, fmt.Errorf("paging scope-a returned an event of scope %q", e.ScopeID)
				}
			}
			return storeSequences(page), nil
		})
	if err != nil {
		return err
	}
	if err := storeIncreasing(seen); err != nil {
		return fmt.Errorf("a cursor repeated or reordered events: %w", err)
	}
	all, err := storePageAll(ctx, s, 1000, func(tx runtime.ReadTx, after int64, limit int) ([]runtime.Event, error) {
		return tx.ScopeEvents("scope-a", after, limit)
	})
	if err != nil {
		return err
	}
	if len(all) != writers*perWriter {
		return fmt.Errorf("scope-a holds %d events, want %d", len(all), writers*perWriter)
	}
	if !slices.Equal(seen, storeSequences(all)) {
		return fmt.Errorf("a cursor paging during writes skipped events: saw %d of %d (an event became visible behind the cursor)",
			len(seen), len(all))
	}
	return nil
}

// pageUnderWriters runs writers goroutines, each committing perWriter
// transactions of write(tx, w, i), while a reader pages with page (limit
// at a time, resuming after the last cursor it returned) until a pass that
// began once every writer had finished finds nothing more. It returns
// every cursor the reader saw, in order. A commit wakes the reader, so it
// pages while the writers run without spinning.
func pageUnderWriters(ctx context.Context, s runtime.Store, writers, perWriter, limit int,
	write func(tx runtime.Tx, w, i int) error, page func(tx runtime.ReadTx, after int64, limit int) ([]int64, error)) ([]int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	writeErrs := make(chan error, writers)
	start := make(chan struct{})
	progress := make(chan struct{}, 1)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range perWriter {
				if err := s.Transact(ctx, func(tx runtime.Tx) error { return write(tx, w, i) }); err != nil {
					writeErrs <- err
					return
				}
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	close(start)

	var seen []int64
	var after int64
	for {
		finished := false
		select {
		case <-done:
			finished = true
		default:
		}
		got, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]int64, error) { return page(tx, after, limit) })
		if err != nil {
			return nil, fmt.Errorf("paging while writers run: %w", err)
		}
		seen = append(seen, got...)
		if len(got) > 0 {
			after = got[len(got)-1]
		}
		if finished && len(got) == 0 {
			break
		}
		if len(got) < limit && !finished {
			select {
			case <-progress:
			case <-done:
			}
		}
	}
	select {
	case err := <-writeErrs:
		return nil, fmt.Errorf("writer: %w", err)
	default:
	}
	return seen, nil
}

func checkWorkEvents(ctx context.Context, s runtime.Store) error {
	var named, routed, both runtime.Event
	err := s.Transact(ctx, func(tx runtime.Tx) error {
		var err error
		env := storeSampleEnvelope("names-w1")
		env.Works = []string{"w-1", "w-1"}
		if named, _, err = tx.AcceptEvent(env); err != nil {
			return err
		}
		if _, _, err = tx.AcceptEvent(storeSampleEnvelope("unrelated")); err != nil {
			return err
		}
		if routed, _, err = tx.AcceptEvent(storeSampleEnvelope("routed-w1")); err != nil {
			return err
		}
		env = storeSampleEnvelope("names-both")
		env.Works = []string{"w-2", "w-1"}
		if both, _, err = tx.AcceptEvent(env); err != nil {
			return err
		}
		if err := tx.LinkEventWork(routed.ID, "w-1"); err != nil {
			return err
		}
		if err := tx.LinkEventWork(routed.ID, "w-1"); err != nil {
			return fmt.Errorf("linking twice must be a no-op: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	want := map[string][]int64{
		"w-1": {named.Sequence, routed.Sequence, both.Sequence},
		"w-2": {both.Sequence},
		"w-3": nil,
	}
	for work, seqs := range want {
		for _, limit := range []int{1, 100} {
			got, err := storePageAll(ctx, s, limit, func(tx runtime.ReadTx, after int64, limit int) ([]runtime.Event, error) {
				return tx.WorkEvents(work, after, limit)
			})
			if err != nil {
				return fmt.Errorf("WorkEvents(%q): %w", work, err)
			}
			if !slices.Equal(storeSequences(got), seqs) {
				return fmt.Errorf("WorkEvents(%q) by pages of %d: sequences %v, want %v", work, limit, storeSequences(got), seqs)
			}
		}
	}
	if !slices.Equal(named.Works, []string{"w-1"}) || !slices.Equal(both.Works, []string{"w-1", "w-2"}) {
		return fmt.Errorf("an event's Works must be stored as a sorted set, got %v and %v", named.Works, both.Works)
	}
	err = s.Transact(ctx, func(tx runtime.Tx) error { return tx.LinkEventWork("no-such-event", "w-1") })
	return storeWantIs(err, runtime.ErrNotFound, "linking an unknown event")
}
