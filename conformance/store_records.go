package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/open-conduit/open-conduit/runtime"
)

// storeT0 is the suite's fixed clock reading for leases, timers and deadlines.
var storeT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func storePutWork(ctx context.Context, s runtime.Store, w runtime.Work) (runtime.Work, error) {
	var stored runtime.Work
	err := s.Transact(ctx, func(tx runtime.Tx) error {
		var err error
		stored, err = tx.PutWork(w)
		return err
	})
	return stored, err
}

func checkWorkRevisions(ctx context.Context, s runtime.Store) error {
	w := runtime.Work{
		ID: "w-1", ScopeID: "scope-a", Kind: "sample.review", Binding: "default", State: runtime.WorkPending,
		CorrelationKeys: []string{"item:7", "thread:3"},
		Display:         json.RawMessage(`{"title":"Review item 7"}`),
		Context:         json.RawMessage(`{"item":7}`),
		Grants:          []string{"sample.comment"},
	}
	created, err := storePutWork(ctx, s, w)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if created.Revision != 1 {
		return fmt.Errorf("a created Work has revision %d, want 1", created.Revision)
	}
	read, err := storeView(ctx, s, func(tx runtime.ReadTx) (runtime.Work, error) { return tx.Work("w-1") })
	if err != nil {
		return err
	}
	if read.Kind != w.Kind || read.Binding != w.Binding || read.State != w.State || read.Revision != 1 ||
		!slices.Equal(read.CorrelationKeys, w.CorrelationKeys) || !slices.Equal(read.Grants, w.Grants) ||
		!bytes.Equal(read.Display, w.Display) || !bytes.Equal(read.Context, w.Context) {
		return fmt.Errorf("Work read back as %+v, want %+v at revision 1", read, w)
	}
	if _, err := storePutWork(ctx, s, w); !errors.Is(err, runtime.ErrConflict) {
		return fmt.Errorf("creating an existing Work: got %v, want ErrConflict", err)
	}
	update := read
	update.State = runtime.WorkRunning
	update.CorrelationKeys = []string{"item:7"}
	updated, err := storePutWork(ctx, s, update)
	if err != nil || updated.Revision != 2 {
		return fmt.Errorf("update at the current revision: revision %d, %v; want 2", updated.Revision, err)
	}
	stale := read
	stale.State = runtime.WorkFailed
	if _, err := storePutWork(ctx, s, stale); !errors.Is(err, runtime.ErrConflict) {
		return fmt.Errorf("update at a stale revision: got %v, want ErrConflict", err)
	}
	if got, _ := storeView(ctx, s, func(tx runtime.ReadTx) (runtime.Work, error) { return tx.Work("w-1") }); got.State != runtime.WorkRunning || got.Revision != 2 {
		return fmt.Errorf("a stale update changed the Work: %+v", got)
	}
	missing := w
	missing.ID, missing.Revision = "w-missing", 3
	if _, err := storePutWork(ctx, s, missing); !errors.Is(err, runtime.ErrNotFound) {
		return fmt.Errorf("updating an absent Work: got %v, want ErrNotFound", err)
	}
	others := []runtime.Work{
		{ID: "w-2", ScopeID: "scope-a", Kind: "sample.triage", State: runtime.WorkPending, CorrelationKeys: []string{"item:8"}},
		{ID: "w-3", ScopeID: "scope-b", Kind: "sample.review", State: runtime.WorkDone, CorrelationKeys: []string{"item:7"}},
		{ID: "w-4", ScopeID: "scope-a", Kind: "sample.review", State: runtime.WorkPending},
	}
	for _, o := range others {
		if _, err := storePutWork(ctx, s, o); err != nil {
			return err
		}
	}
	cases := []struct {
		filter runtime.WorkFilter
		want   []string
	}{
		{runtime.WorkFilter{}, []string{"w-1", "w-2", "w-3", "w-4"}},
		{runtime.WorkFilter{ScopeID: "scope-a"}, []string{"w-1", "w-2", "w-4"}},
		{runtime.WorkFilter{Kind: "sample.review"}, []string{"w-1", "w-3", "w-4"}},
		{runtime.WorkFilter{State: runtime.WorkPending}, []string{"w-2", "w-4"}},
		{runtime.WorkFilter{CorrelationKey: "item:7"}, []string{"w-1", "w-3"}},
		{runtime.WorkFilter{CorrelationKey: "thread:3"}, nil}, // dropped by the update
		{runtime.WorkFilter{ScopeID: "scope-a", After: "w-1", Limit: 1}, []string{"w-2"}},
	}
	for _, c := range cases {
		got, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.Work, error) { return tx.Works(c.filter) })
		if err != nil {
			return fmt.Errorf("Works(%+v): %w", c.filter, err)
		}
		var ids []string
		for _, g := range got {
			ids = append(ids, g.ID)
		}
		if !slices.Equal(ids, c.want) {
			return fmt.Errorf("Works(%+v) = %v, want %v", c.filter, ids, c.want)
		}
	}
	return nil
}

func checkLeaseFencing(ctx context.Context, s runtime.Store) error {
	const ttl = time.Minute
	var first runtime.Lease
	err := s.Transact(ctx, func(tx runtime.Tx) error {
		var err error
		if first, err = tx.AcquireLease(runtime.LeaseRequest{Name: "work/w-1", Holder: "observer-1", Now: storeT0, TTL: ttl}); err != nil {
			return err
		}
		_, err = tx.PutExecution(runtime.Execution{
			ID: "x-1", WorkID: "w-1", Attempt: 1, Executor: "sample.exec", Lease: "work/w-1", Epoch: first.Epoch,
			State: runtime.ExecutionRunning, Recovery: json.RawMessage(`{"pid":1}`), StartedAt: storeT0,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("acquire and start: %w", err)
	}
	if first.Epoch < 1 {
		return fmt.Errorf("a first lease has epoch %d, want ≥ 1", first.Epoch)
	}
	try := func(what string, fn func(tx runtime.Tx) error) error {
		var opErr error
		if err := s.Transact(ctx, func(tx runtime.Tx) error { opErr = fn(tx); return nil }); err != nil {
			return fmt.Errorf("%s: transaction: %w", what, err)
		}
		return opErr
	}
	err = try("acquire held", func(tx runtime.Tx) error {
		_, err := tx.AcquireLease(runtime.LeaseRequest{Name: "work/w-1", Holder: "observer-2", Now: storeT0.Add(time.Second), TTL: ttl})
		return err
	})
	if err := storeWantIs(err, runtime.ErrConflict, "acquiring a lease another holder holds live"); err != nil {
		return err
	}
	var second runtime.Lease
	err = try("supersede", func(tx runtime.Tx) error {
		var err error
		second, err = tx.AcquireLease(runtime.LeaseRequest{Name: "work/w-1", Holder: "observer-2", Now: storeT0.Add(time.Second), TTL: ttl, Supersede: true})
		return err
	})
	if err != nil {
		return fmt.Errorf("superseding: %w", err)
	}
	if second.Epoch <= first.Epoch {
		return fmt.Errorf("superseding epoch %d is not after %d", second.Epoch, first.Epoch)
	}
	// The superseded observer is refused on every fenced path.
	fenced := map[string]func(tx runtime.Tx) error{
		"CheckLease": func(tx runtime.Tx) error { return tx.CheckLease("work/w-1", first.Epoch) },
		"PersistRecovery": func(tx runtime.Tx) error {
			return tx.PersistRecovery("x-1", first.Epoch, []byte(`{"pid":666}`))
		},
		"PutExecution": func(tx runtime.Tx) error {
			_, err := tx.PutExecution(runtime.Execution{ID: "x-1", WorkID: "w-1", Attempt: 1, Lease: "work/w-1",
				Epoch: first.Epoch, State: runtime.ExecutionFailed, Error: "stale observer"})
			return err
		},
		"RenewLease": func(tx runtime.Tx) error {
			_, err := tx.RenewLease("work/w-1", first.Epoch, storeT0.Add(2*time.Second), ttl)
			return err
		},
		"ReleaseLease": func(tx runtime.Tx) error { return tx.ReleaseLease("work/w-1", first.Epoch) },
	}
	for _, name := range slices.Sorted(maps.Keys(fenced)) {
		if err := storeWantIs(try(name, fenced[name]), runtime.ErrConflict, name+" at a superseded epoch"); err != nil {
			return err
		}
	}
	x, err := storeView(ctx, s, func(tx runtime.ReadTx) (runtime.Execution, error) { return tx.Execution("x-1") })
	if err != nil {
		return err
	}
	if string(x.Recovery) != `{"pid":1}` || x.State != runtime.ExecutionRunning {
		return fmt.Errorf("a superseded observer's writes reached the execution: state %s recovery %s", x.State, x.Recovery)
	}
	// The current epoch writes.
	err = try("current epoch", func(tx runtime.Tx) error {
		if err := tx.CheckLease("work/w-1", second.Epoch); err != nil {
			return err
		}
		if err := tx.PersistRecovery("x-1", second.Epoch, []byte(`{"pid":2}`)); err != nil {
			return err
		}
		if _, err := tx.RenewLease("work/w-1", second.Epoch, storeT0.Add(3*time.Second), ttl); err != nil {
			return err
		}
		return tx.ReleaseLease("work/w-1", second.Epoch)
	})
	if err != nil {
		return fmt.Errorf("writes at the current epoch: %w", err)
	}
	x, err = storeView(ctx, s, func(tx runtime.ReadTx) (runtime.Execution, error) { return tx.Execution("x-1") })
	if err != nil || string(x.Recovery) != `{"pid":2}` {
		return fmt.Errorf("recovery after a fenced persist = %s (%v), want {\"pid\":2}", x.Recovery, err)
	}
	err = try("after release", func(tx runtime.Tx) error { return tx.CheckLease("work/w-1", second.Epoch) })
	if err := storeWantIs(err, runtime.ErrConflict, "a released epoch"); err != nil {
		return err
	}
	var third runtime.Lease
	err = try("acquire released", func(tx runtime.Tx) error {
		var err error
		third, err = tx.AcquireLease(runtime.LeaseRequest{Name: "work/w-1", Holder: "observer-3", Now: storeT0.Add(4 * time.Second), TTL: ttl})
		return err
	})
	if err != nil || third.Epoch <= second.Epoch {
		return fmt.Errorf("acquiring a released lease: epoch %d, %v; want > %d", third.Epoch, err, second.Epoch)
	}
	// An expired lease may be taken by another holder without Supersede.
	var fourth runtime.Lease
	err = try("acquire expired", func(tx runtime.Tx) error {
		var err error
		fourth, err = tx.AcquireLease(runtime.LeaseRequest{Name: "work/w-1", Holder: "observer-4", Now: storeT0.Add(time.Hour), TTL: ttl})
		return err
	})
	if err != nil || fourth.Epoch <= third.Epoch {
		return fmt.Errorf("acquiring an expired lease: epoch %d, %v; want > %d", fourth.Epoch, err, third.Epoch)
	}
	err = try("unleased execution", func(tx runtime.Tx) error {
		_, err := tx.PutExecution(runtime.Execution{ID: "x-2", WorkID: "w-1", State: runtime.ExecutionRunning})
		return err
	})
	return storeWantIs(err, runtime.ErrInvalid, "an Execution without a lease")
}

func checkTimers(ctx context.Context, s runtime.Store) error {
	err := s.Transact(ctx, func(tx runtime.Tx) error {
		for _, tm := range []runtime.Timer{
			{Key: "t-late", Kind: "sample.daily", Due: storeT0.Add(time.Hour), Recurrence: "0 9 * * *"},
			{Key: "t-early", ScopeID: "scope-a", WorkID: "w-1", Due: storeT0.Add(time.Minute), Payload: json.RawMessage(`{"n":1}`)},
			{Key: "t-due", Due: storeT0},
		} {
			if _, err := tx.ArmTimer(tm); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	due := func(at time.Time) ([]string, error) {
		tms, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.Timer, error) { return tx.DueTimers(at, 10) })
		var keys []string
		for _, tm := range tms {
			keys = append(keys, tm.Key)
		}
		return keys, err
	}
	if got, err := due(storeT0.Add(time.Minute)); err != nil || !slices.Equal(got, []string{"t-due", "t-early"}) {
		return fmt.Errorf("DueTimers(storeT0+1m) = %v, %v; want [t-due t-early] (earliest first, at or before)", got, err)
	}
	err = s.Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.ArmTimer(runtime.Timer{Key: "t-early", Due: storeT0.Add(2 * time.Hour)})
		return err
	})
	if err != nil {
		return err
	}
	if got, err := due(storeT0.Add(90 * time.Minute)); err != nil || !slices.Equal(got, []string{"t-due", "t-late"}) {
		return fmt.Errorf("after re-arming t-early, DueTimers(storeT0+90m) = %v, %v; want [t-due t-late]", got, err)
	}
	tm, err := storeView(ctx, s, func(tx runtime.ReadTx) (runtime.Timer, error) { return tx.Timer("t-late") })
	if err != nil || tm.Recurrence != "0 9 * * *" || tm.Kind != "sample.daily" || !tm.Due.Equal(storeT0.Add(time.Hour)) {
		return fmt.Errorf("Timer(t-late) = %+v, %v", tm, err)
	}
	var first, second bool
	err = s.Transact(ctx, func(tx runtime.Tx) error {
		var err error
		if first, err = tx.CancelTimer("t-due"); err != nil {
			return err
		}
		second, err = tx.CancelTimer("t-due")
		return err
	})
	if err != nil || !first || second {
		return fmt.Errorf("cancelling twice: %v then %v (%v); want true then false", first, second, err)
	}
	if got, err := due(storeT0.Add(3 * time.Hour)); err != nil || !slices.Equal(got, []string{"t-late", "t-early"}) {
		return fmt.Errorf("after cancelling t-due, DueTimers = %v, %v; want [t-late t-early]", got, err)
	}
	_, err = storeView(ctx, s, func(tx runtime.ReadTx) (runtime.Timer, error) { return tx.Timer("t-due") })
	return storeWantIs(err, runtime.ErrNotFound, "a cancelled timer")
}

func storePutWait(ctx context.Context, s runtime.Store, w runtime.Wait) (runtime.Wait, error) {
	var stored runtime.Wait
	err := s.Transact(ctx, func(tx runtime.Tx) error {
		var err error
		stored, err = tx.PutWait(w)
		return err
	})
	return stored, err
}

func checkWaits(ctx context.Context, s runtime.Store) error {
	first := runtime.Wait{ID: "wait-1", WorkID: "w-1", Keys: []string{"item:7", "review:3"}, Target: "job:nightly",
		Description: "waiting for review", Owner: "sample", State: runtime.WaitActive, Deadline: storeT0.Add(time.Hour)}
	if _, err := storePutWait(ctx, s, first); err != nil {
		return err
	}
	if _, err := storePutWait(ctx, s, runtime.Wait{ID: "wait-2", WorkID: "w-1", State: runtime.WaitActive}); !errors.Is(err, runtime.ErrConflict) {
		return fmt.Errorf("a second active Wait on one Work: got %v, want ErrConflict", err)
	}
	if _, err := storePutWait(ctx, s, runtime.Wait{ID: "wait-3", WorkID: "w-2", Keys: []string{"item:7"}, State: runtime.WaitActive}); err != nil {
		return fmt.Errorf("an active Wait on another Work: %w", err)
	}
	err := s.Transact(ctx, func(tx runtime.Tx) error { return tx.SetWaitProgress("wait-1", "intruder", "hijacked") })
	if err := storeWantIs(err, runtime.ErrConflict, "progress set by someone other than the owner"); err != nil {
		return err
	}
	if err := s.Transact(ctx, func(tx runtime.Tx) error { return tx.SetWaitProgress("wait-1", "sample", "2 of 3 approvals") }); err != nil {
		return fmt.Errorf("progress set by the owner: %w", err)
	}
	active, err := storeView(ctx, s, func(tx runtime.ReadTx) (runtime.Wait, error) { return tx.ActiveWait("w-1") })
	if err != nil || active.ID != "wait-1" || active.Progress != "2 of 3 approvals" || active.Target != "job:nightly" ||
		!slices.Equal(active.Keys, first.Keys) || !active.Deadline.Equal(first.Deadline) {
		return fmt.Errorf("ActiveWait(w-1) = %+v, %v", active, err)
	}
	byKey, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.Wait, error) { return tx.WaitsForKey("item:7") })
	if err != nil || len(byKey) != 2 {
		return fmt.Errorf("WaitsForKey(item:7) = %d waits, %v; want 2", len(byKey), err)
	}
	satisfied := active
	satisfied.State, satisfied.ResolvedAt = runtime.WaitSatisfied, storeT0.Add(time.Minute)
	if _, err := storePutWait(ctx, s, satisfied); err != nil {
		return err
	}
	if _, err := storeView(ctx, s, func(tx runtime.ReadTx) (runtime.Wait, error) { return tx.ActiveWait("w-1") }); !errors.Is(err, runtime.ErrNotFound) {
		return fmt.Errorf("ActiveWait after the Wait was satisfied: got %v, want ErrNotFound", err)
	}
	byKey, err = storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.Wait, error) { return tx.WaitsForKey("review:3") })
	if err != nil || len(byKey) != 0 {
		return fmt.Errorf("WaitsForKey lists a satisfied Wait: %d, %v", len(byKey), err)
	}
	if _, err := storePutWait(ctx, s, runtime.Wait{ID: "wait-4", WorkID: "w-1", State: runtime.WaitActive}); err != nil {
		return fmt.Errorf("a new active Wait once the old one was satisfied: %w", err)
	}
	all, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.Wait, error) { return tx.Waits("w-1") })
	if err != nil || len(all) != 2 {
		return fmt.Errorf("Waits(w-1) = %d, %v; want 2", len(all), err)
	}
	err = s.Transact(ctx, func(tx runtime.Tx) error { return tx.SetWaitProgress("wait-1", "sample", "late") })
	return storeWantIs(err, runtime.ErrConflict, "progress on a satisfied Wait")
}

func checkTransactionRollback(ctx context.Context, s runtime.Store) error {
	write := func(tx runtime.Tx, delivery string) error {
		if _, _, err := tx.AcceptEvent(storeSampleEnvelope(delivery)); err != nil {
			return err
		}
		return tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "sample", Key: delivery, Value: []byte("v")}}})
	}
	kept := func(delivery string) (bool, error) {
		return storeView(ctx, s, func(tx runtime.ReadTx) (bool, error) {
			_, errEv := tx.EventByDelivery("ingress.sample", delivery)
			_, found, err := tx.KVGet("sample", delivery)
			if err != nil {
				return false, err
			}
			if errEv != nil && !errors.Is(errEv, runtime.ErrNotFound) {
				return false, errEv
			}
			return errEv == nil || found, nil
		})
	}
	boom := errors.New("boom")
	if err := s.Transact(ctx, func(tx runtime.Tx) error {
		if err := write(tx, "failed"); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		return fmt.Errorf("Transact returned %v, want fn's error", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	err := s.Transact(cctx, func(tx runtime.Tx) error {
		if err := write(tx, "cancelled"); err != nil {
			return err
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		return fmt.Errorf("a transaction whose context was cancelled before commit returned %v, want context.Canceled", err)
	}
	panicked := func() (p any) {
		defer func() { p = recover() }()
		_ = s.Transact(ctx, func(tx runtime.Tx) error {
			if err := write(tx, "panicked"); err != nil {
				return err
			}
			panic("fn panicked")
		})
		return nil
	}()
	if panicked == nil {
		return errors.New("a panic in fn did not propagate out of Transact")
	}
	for _, d := range []string{"failed", "cancelled", "panicked"} {
		k, err := kept(d)
		if err != nil {
			return err
		}
		if k {
			return fmt.Errorf("the %s transaction's writes were kept", d)
		}
	}
	// The store still works after all that.
	if err := s.Transact(ctx, func(tx runtime.Tx) error { return write(tx, "committed") }); err != nil {
		return err
	}
	if k, err := kept("committed"); err != nil || !k {
		return fmt.Errorf("a committed transaction's writes are missing (%v)", err)
	}
	var leaked runtime.Tx
	if err := s.Transact(ctx, func(tx runtime.Tx) error { leaked = tx; return nil }); err != nil {
		return err
	}
	if _, err := leaked.LatestSequence(); err == nil {
		return errors.New("a Tx used after its transaction finished still answers")
	}
	return nil
}

func checkToolResults(ctx context.Context, s runtime.Store) error {
	putResult := func(r runtime.ToolResult) (runtime.ToolResult, bool, error) {
		var (
			stored runtime.ToolResult
			added  bool
		)
		err := s.Transact(ctx, func(tx runtime.Tx) error {
			var err error
			stored, added, err = tx.PutToolResult(r)
			return err
		})
		return stored, added, err
	}
	first, added, err := putResult(runtime.ToolResult{RequestID: "req-1", Operation: "sample.comment", Result: json.RawMessage(`{"comment":1}`)})
	if err != nil || !added {
		return fmt.Errorf("first result: added=%v %v", added, err)
	}
	replay, added, err := putResult(runtime.ToolResult{RequestID: "req-1", Operation: "sample.comment", Result: json.RawMessage(`{"comment":2}`)})
	if err != nil || added || string(replay.Result) != `{"comment":1}` {
		return fmt.Errorf("a second result under one request ID: added=%v result=%s %v; want the first, not added", added, replay.Result, err)
	}
	read, err := storeView(ctx, s, func(tx runtime.ReadTx) (runtime.ToolResult, error) { return tx.ToolResult("req-1") })
	if err != nil || string(read.Result) != string(first.Result) || read.Operation != "sample.comment" {
		return fmt.Errorf("ToolResult(req-1) = %+v, %v", read, err)
	}
	_, err = storeView(ctx, s, func(tx runtime.ReadTx) (runtime.ToolResult, error) { return tx.ToolResult("req-2") })
	return storeWantIs(err, runtime.ErrNotFound, "an unknown request ID")
}

func checkScopesAndArtifacts(ctx context.Context, s runtime.Store) error {
	digest := runtime.KVVersion([]byte("artifact content")) // a sha256:<hex> digest
	err := s.Transact(ctx, func(tx runtime.Tx) error {
		for _, sc := range []runtime.Scope{
			{ID: "scope-b", Name: "B"},
			{ID: "scope-a", Name: "A", Config: json.RawMessage(`{"routes":[]}`)},
		} {
			if _, err := tx.PutScope(sc); err != nil {
				return err
			}
		}
		_, err := tx.PutArtifact(runtime.Artifact{ID: "a-1", WorkID: "w-1", ExecutionID: "x-1", Name: "log.txt",
			MediaType: "text/plain", Digest: digest, Size: 16})
		return err
	})
	if err != nil {
		return err
	}
	scopes, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.Scope, error) { return tx.Scopes() })
	if err != nil || len(scopes) != 2 || scopes[0].ID != "scope-a" || string(scopes[0].Config) != `{"routes":[]}` {
		return fmt.Errorf("Scopes() = %+v, %v", scopes, err)
	}
	a, err := storeView(ctx, s, func(tx runtime.ReadTx) (runtime.Artifact, error) { return tx.Artifact("a-1") })
	if err != nil || a.Digest != digest || a.Size != 16 || a.Name != "log.txt" {
		return fmt.Errorf("Artifact(a-1) = %+v, %v", a, err)
	}
	list, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.Artifact, error) { return tx.Artifacts("w-1") })
	if err != nil || len(list) != 1 {
		return fmt.Errorf("Artifacts(w-1) = %d, %v; want 1", len(list), err)
	}
	err = s.Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutArtifact(runtime.Artifact{ID: "a-1", Digest: digest})
		return err
	})
	return storeWantIs(err, runtime.ErrConflict, "recording an artifact ID twice")
}
