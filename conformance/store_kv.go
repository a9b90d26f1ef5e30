package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/open-conduit/open-conduit/runtime"
)

func storeKvCommit(ctx context.Context, s runtime.Store, b runtime.KVBatch) error {
	return s.Transact(ctx, func(tx runtime.Tx) error { return tx.KVCommit(b) })
}

func storeKvGet(ctx context.Context, s runtime.Store, ns, key string) (runtime.KVEntry, bool, error) {
	var (
		e     runtime.KVEntry
		found bool
	)
	err := s.View(ctx, func(tx runtime.ReadTx) error {
		var err error
		e, found, err = tx.KVGet(ns, key)
		return err
	})
	return e, found, err
}

func storePut(ns, key, value string) runtime.KVPut {
	return runtime.KVPut{Namespace: ns, Key: key, Value: []byte(value)}
}

func checkKVReadWrite(ctx context.Context, s runtime.Store) error {
	if _, found, err := storeKvGet(ctx, s, "sample", "absent"); err != nil || found {
		return fmt.Errorf("KVGet of an absent key: found=%v %v; want not found, nil", found, err)
	}
	puts := []runtime.KVPut{
		storePut("sample", "notes/1", "one"), storePut("sample", "notes/2", "two"), storePut("sample", "notes/3", "three"),
		storePut("sample", "notes0", "outside the prefix"), storePut("sample", "note", "shorter"),
		storePut("sample.cache", "notes/1", "other namespace"), storePut("sample", "empty", ""),
	}
	if err := storeKvCommit(ctx, s, runtime.KVBatch{Puts: puts}); err != nil {
		return err
	}
	e, found, err := storeKvGet(ctx, s, "sample", "notes/2")
	if err != nil || !found || string(e.Value) != "two" || e.Version != runtime.KVVersion([]byte("two")) {
		return fmt.Errorf("KVGet(sample, notes/2) = %q version %q found=%v %v; want \"two\" at KVVersion", e.Value, e.Version, found, err)
	}
	if e, found, err := storeKvGet(ctx, s, "sample.cache", "notes/1"); err != nil || !found || string(e.Value) != "other namespace" {
		return fmt.Errorf("namespaces are not separate: %q found=%v %v", e.Value, found, err)
	}
	if e, found, err := storeKvGet(ctx, s, "sample", "empty"); err != nil || !found || len(e.Value) != 0 {
		return fmt.Errorf("an empty value: %q found=%v %v; want found and empty", e.Value, found, err)
	}
	listKeys := func(prefix, after string, limit int) ([]string, error) {
		entries, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.KVEntry, error) {
			return tx.KVList("sample", prefix, after, limit)
		})
		var keys []string
		for _, e := range entries {
			if e.Namespace != "sample" || e.Version != runtime.KVVersion(e.Value) {
				return nil, fmt.Errorf("KVList entry %+v has the wrong namespace or version", e)
			}
			keys = append(keys, e.Key)
		}
		return keys, err
	}
	cases := []struct {
		prefix, after string
		limit         int
		want          []string
	}{
		{"notes/", "", 10, []string{"notes/1", "notes/2", "notes/3"}},
		{"notes/", "", 2, []string{"notes/1", "notes/2"}},
		{"notes/", "notes/2", 10, []string{"notes/3"}},
		{"notes/", "notes/3", 10, nil},
		{"note", "", 10, []string{"note", "notes/1", "notes/2", "notes/3", "notes0"}},
		{"note", "note", 10, []string{"notes/1", "notes/2", "notes/3", "notes0"}},
		{"", "notes/3", 10, []string{"notes0"}},
		{"zzz", "", 10, nil},
	}
	for _, c := range cases {
		got, err := listKeys(c.prefix, c.after, c.limit)
		if err != nil {
			return fmt.Errorf("KVList(%q, after %q): %w", c.prefix, c.after, err)
		}
		if !slices.Equal(got, c.want) {
			return fmt.Errorf("KVList(prefix %q, after %q, limit %d) = %v, want %v", c.prefix, c.after, c.limit, got, c.want)
		}
	}
	if err := storeKvCommit(ctx, s, runtime.KVBatch{
		Puts:    []runtime.KVPut{storePut("sample", "notes/2", "TWO")},
		Deletes: []runtime.KVKey{{Namespace: "sample", Key: "notes/1"}, {Namespace: "sample", Key: "never-written"}},
	}); err != nil {
		return fmt.Errorf("overwrite and delete: %w", err)
	}
	if _, found, _ := storeKvGet(ctx, s, "sample", "notes/1"); found {
		return errors.New("a deleted key is still present")
	}
	if e, _, _ := storeKvGet(ctx, s, "sample", "notes/2"); string(e.Value) != "TWO" || e.Version != runtime.KVVersion([]byte("TWO")) {
		return fmt.Errorf("an overwritten key reads %q at %q", e.Value, e.Version)
	}
	if e, found, _ := storeKvGet(ctx, s, "sample.cache", "notes/1"); !found || string(e.Value) != "other namespace" {
		return errors.New("a delete in one namespace removed another namespace's key")
	}
	return nil
}

func checkKVPreconditions(ctx context.Context, s runtime.Store) error {
	if err := storeKvCommit(ctx, s, runtime.KVBatch{
		Preconditions: []runtime.KVPrecondition{{Namespace: "sample", Key: "k", Absent: true}},
		Puts:          []runtime.KVPut{storePut("sample", "k", "v1")},
	}); err != nil {
		return fmt.Errorf("create with an absence precondition: %w", err)
	}
	v1 := runtime.KVVersion([]byte("v1"))
	refused := []struct {
		name string
		pre  runtime.KVPrecondition
	}{
		{"absence of a present key", runtime.KVPrecondition{Namespace: "sample", Key: "k", Absent: true}},
		{"a stale version", runtime.KVPrecondition{Namespace: "sample", Key: "k", Version: runtime.KVVersion([]byte("v0"))}},
		{"a version of an absent key", runtime.KVPrecondition{Namespace: "sample", Key: "other", Version: v1}},
		{"the version of another namespace's key", runtime.KVPrecondition{Namespace: "sample.cache", Key: "k", Version: v1}},
	}
	for _, r := range refused {
		err := storeKvCommit(ctx, s, runtime.KVBatch{Preconditions: []runtime.KVPrecondition{r.pre}, Puts: []runtime.KVPut{storePut("sample", "k", "lost")}})
		if err := storeWantIs(err, runtime.ErrConflict, "precondition on "+r.name); err != nil {
			return err
		}
	}
	if e, _, _ := storeKvGet(ctx, s, "sample", "k"); string(e.Value) != "v1" {
		return fmt.Errorf("a refused commit wrote %q", e.Value)
	}
	err := storeKvCommit(ctx, s, runtime.KVBatch{
		Preconditions: []runtime.KVPrecondition{{Namespace: "sample", Key: "k", Version: v1}},
		Deletes:       []runtime.KVKey{{Namespace: "sample", Key: "k"}},
	})
	if err != nil {
		return fmt.Errorf("delete at the current version: %w", err)
	}
	if _, found, _ := storeKvGet(ctx, s, "sample", "k"); found {
		return errors.New("a delete at the current version left the key")
	}
	return nil
}

func checkKVCommitAtomic(ctx context.Context, s runtime.Store) error {
	if err := storeKvCommit(ctx, s, runtime.KVBatch{Puts: []runtime.KVPut{storePut("sample", "a", "a0"), storePut("sample", "b", "b0")}}); err != nil {
		return err
	}
	// The last precondition fails; the batch must apply none of its writes,
	// even though the surrounding transaction commits.
	var commitErr error
	err := s.Transact(ctx, func(tx runtime.Tx) error {
		commitErr = tx.KVCommit(runtime.KVBatch{
			Preconditions: []runtime.KVPrecondition{
				{Namespace: "sample", Key: "a", Version: runtime.KVVersion([]byte("a0"))},
				{Namespace: "sample", Key: "c", Absent: true},
				{Namespace: "sample", Key: "b", Version: runtime.KVVersion([]byte("stale"))},
			},
			Puts:    []runtime.KVPut{storePut("sample", "a", "a1"), storePut("sample", "c", "c1")},
			Deletes: []runtime.KVKey{{Namespace: "sample", Key: "b"}},
		})
		return nil
	})
	if err != nil {
		return err
	}
	if err := storeWantIs(commitErr, runtime.ErrConflict, "a batch with one failing precondition"); err != nil {
		return err
	}
	for key, want := range map[string]string{"a": "a0", "b": "b0"} {
		if e, found, err := storeKvGet(ctx, s, "sample", key); err != nil || !found || string(e.Value) != want {
			return fmt.Errorf("a failed batch was partly applied: %s = %q found=%v (%v), want %q", key, e.Value, found, err, want)
		}
	}
	if e, found, _ := storeKvGet(ctx, s, "sample", "c"); found {
		return fmt.Errorf("a failed batch was partly applied: c = %q", e.Value)
	}
	return nil
}

func checkKVConcurrentCommit(ctx context.Context, s runtime.Store) error {
	const racers, rounds = 8, 3
	if err := storeKvCommit(ctx, s, runtime.KVBatch{Puts: []runtime.KVPut{storePut("sample", "counter", "start")}}); err != nil {
		return err
	}
	for round := range rounds {
		cur, _, err := storeKvGet(ctx, s, "sample", "counter")
		if err != nil {
			return err
		}
		errs := make([]error, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = storeKvCommit(ctx, s, runtime.KVBatch{
					Preconditions: []runtime.KVPrecondition{{Namespace: "sample", Key: "counter", Version: cur.Version}},
					Puts:          []runtime.KVPut{storePut("sample", "counter", fmt.Sprintf("round %d racer %d", round, i))},
				})
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				return fmt.Errorf("round %d: racers %d and %d both committed at version %s", round, winner, i, cur.Version)
			case err == nil:
				winner = i
			case !errors.Is(err, runtime.ErrConflict):
				return fmt.Errorf("round %d: a losing racer got %v, want ErrConflict", round, err)
			}
		}
		if winner < 0 {
			return fmt.Errorf("round %d: no racer committed", round)
		}
		e, _, err := storeKvGet(ctx, s, "sample", "counter")
		if want := fmt.Sprintf("round %d racer %d", round, winner); err != nil || string(e.Value) != want {
			return fmt.Errorf("round %d: value %q (%v), want the winner's %q", round, e.Value, err, want)
		}
	}
	return nil
}

func checkBadInput(ctx context.Context, s runtime.Store) error {
	long := func(n int) string { return strings.Repeat("n", n) }
	kvBad := []struct {
		name   string
		batch  runtime.KVBatch
		target error
	}{
		{"a value over MaxKVValueBytes", runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "sample", Key: "big",
			Value: bytes.Repeat([]byte("x"), runtime.MaxKVValueBytes+1)}}}, runtime.ErrTooLarge},
		{"an empty namespace", runtime.KVBatch{Puts: []runtime.KVPut{storePut("", "k", "v")}}, runtime.ErrInvalid},
		{"a namespace over MaxNamespaceBytes", runtime.KVBatch{Puts: []runtime.KVPut{storePut(long(runtime.MaxNamespaceBytes+1), "k", "v")}}, runtime.ErrInvalid},
		{"a namespace with a control character", runtime.KVBatch{Puts: []runtime.KVPut{storePut("sam\nple", "k", "v")}}, runtime.ErrInvalid},
		{"a namespace of invalid UTF-8", runtime.KVBatch{Puts: []runtime.KVPut{storePut("sam\xffple", "k", "v")}}, runtime.ErrInvalid},
		{"an empty key", runtime.KVBatch{Puts: []runtime.KVPut{storePut("sample", "", "v")}}, runtime.ErrInvalid},
		{"a key of invalid UTF-8", runtime.KVBatch{Puts: []runtime.KVPut{storePut("sample", "k\xc3\x28", "v")}}, runtime.ErrInvalid},
		{"a key over MaxKeyBytes", runtime.KVBatch{Puts: []runtime.KVPut{storePut("sample", long(runtime.MaxKeyBytes+1), "v")}}, runtime.ErrInvalid},
		{"a bad delete key", runtime.KVBatch{Deletes: []runtime.KVKey{{Namespace: "sample", Key: "\xff"}}}, runtime.ErrInvalid},
		{"a precondition with neither version nor absence", runtime.KVBatch{
			Preconditions: []runtime.KVPrecondition{{Namespace: "sample", Key: "k"}}}, runtime.ErrInvalid},
		{"a key written twice", runtime.KVBatch{Puts: []runtime.KVPut{storePut("sample", "k", "1")},
			Deletes: []runtime.KVKey{{Namespace: "sample", Key: "k"}}}, runtime.ErrInvalid},
	}
	for _, c := range kvBad {
		// Each bad batch also carries a good put, which must not land.
		b := c.batch
		b.Puts = append([]runtime.KVPut{storePut("sample", "good", "v")}, b.Puts...)
		var commitErr error
		if err := s.Transact(ctx, func(tx runtime.Tx) error { commitErr = tx.KVCommit(b); return nil }); err != nil {
			return fmt.Errorf("%s: transaction: %w", c.name, err)
		}
		if err := storeWantIs(commitErr, c.target, c.name); err != nil {
			return err
		}
	}
	if err := s.View(ctx, func(tx runtime.ReadTx) error {
		if _, _, err := tx.KVGet("sample", "\xff"); !errors.Is(err, runtime.ErrInvalid) {
			return fmt.Errorf("KVGet of an invalid key: got %v, want ErrInvalid", err)
		}
		_, err := tx.KVList("", "", "", 10)
		return storeWantIs(err, runtime.ErrInvalid, "KVList of an empty namespace")
	}); err != nil {
		return err
	}
	entries, err := storeView(ctx, s, func(tx runtime.ReadTx) ([]runtime.KVEntry, error) { return tx.KVList("sample", "", "", 100) })
	if err != nil || len(entries) != 0 {
		return fmt.Errorf("refused batches wrote %d entries (%v)", len(entries), err)
	}

	evBad := []struct {
		name   string
		change func(*runtime.Envelope)
		target error
	}{
		{"a payload that is not JSON", func(e *runtime.Envelope) { e.Payload = []byte(`{"id":`) }, runtime.ErrInvalid},
		{"a payload of two JSON values", func(e *runtime.Envelope) { e.Payload = []byte(`{} {}`) }, runtime.ErrInvalid},
		{"a payload with a duplicate key", func(e *runtime.Envelope) { e.Payload = []byte(`{"a":1,"a":2}`) }, runtime.ErrInvalid},
		{"a payload of invalid UTF-8", func(e *runtime.Envelope) { e.Payload = []byte("{\"a\":\"\xff\"}") }, runtime.ErrInvalid},
		{"a payload over MaxPayloadBytes", func(e *runtime.Envelope) {
			e.Payload = []byte(`"` + long(runtime.MaxPayloadBytes) + `"`)
		}, runtime.ErrTooLarge},
		{"no source", func(e *runtime.Envelope) { e.Source = "" }, runtime.ErrInvalid},
		{"no delivery ID", func(e *runtime.Envelope) { e.DeliveryID = "" }, runtime.ErrInvalid},
		{"a delivery ID of invalid UTF-8", func(e *runtime.Envelope) { e.DeliveryID = "d\xff" }, runtime.ErrInvalid},
		{"a scope with a control character", func(e *runtime.Envelope) { e.ScopeID = "scope\x00" }, runtime.ErrInvalid},
	}
	for _, c := range evBad {
		env := storeSampleEnvelope("bad")
		c.change(&env)
		var acceptErr error
		if err := s.Transact(ctx, func(tx runtime.Tx) error { _, _, acceptErr = tx.AcceptEvent(env); return nil }); err != nil {
			return fmt.Errorf("%s: transaction: %w", c.name, err)
		}
		if err := storeWantIs(acceptErr, c.target, "an envelope with "+c.name); err != nil {
			return err
		}
	}
	if seq, err := storeLatest(ctx, s); err != nil || seq != 0 {
		return fmt.Errorf("refused envelopes were accepted: LatestSequence = %d (%v)", seq, err)
	}

	records := []struct {
		name string
		fn   func(tx runtime.Tx) error
	}{
		{"a Work with an unknown state", func(tx runtime.Tx) error {
			_, err := tx.PutWork(runtime.Work{ID: "w-bad", State: "exploded"})
			return err
		}},
		{"a Work with display that is not JSON", func(tx runtime.Tx) error {
			_, err := tx.PutWork(runtime.Work{ID: "w-bad", State: runtime.WorkPending, Display: []byte("<b>")})
			return err
		}},
		{"a Work without an ID", func(tx runtime.Tx) error {
			_, err := tx.PutWork(runtime.Work{State: runtime.WorkPending})
			return err
		}},
		{"a timer without a due time", func(tx runtime.Tx) error {
			_, err := tx.ArmTimer(runtime.Timer{Key: "t-bad"})
			return err
		}},
		{"a Wait with an unknown state", func(tx runtime.Tx) error {
			_, err := tx.PutWait(runtime.Wait{ID: "wait-bad", WorkID: "w-bad", State: "pending"})
			return err
		}},
		{"a lease without a TTL", func(tx runtime.Tx) error {
			_, err := tx.AcquireLease(runtime.LeaseRequest{Name: "l", Holder: "h", Now: storeT0})
			return err
		}},
		{"a tool result that is not JSON", func(tx runtime.Tx) error {
			_, _, err := tx.PutToolResult(runtime.ToolResult{RequestID: "req-bad", Result: []byte("nope")})
			return err
		}},
	}
	for _, r := range records {
		var opErr error
		if err := s.Transact(ctx, func(tx runtime.Tx) error { opErr = r.fn(tx); return nil }); err != nil {
			return fmt.Errorf("%s: transaction: %w", r.name, err)
		}
		if err := storeWantIs(opErr, runtime.ErrInvalid, r.name); err != nil {
			return err
		}
	}
	return s.View(ctx, func(tx runtime.ReadTx) error {
		if works, err := tx.Works(runtime.WorkFilter{}); err != nil || len(works) != 0 {
			return fmt.Errorf("refused Works were stored: %d (%v)", len(works), err)
		}
		if _, err := tx.Timer("t-bad"); !errors.Is(err, runtime.ErrNotFound) {
			return fmt.Errorf("a refused timer was armed (%v)", err)
		}
		if _, err := tx.Wait("wait-bad"); !errors.Is(err, runtime.ErrNotFound) {
			return fmt.Errorf("a refused Wait was stored (%v)", err)
		}
		if _, err := tx.ToolResult("req-bad"); !errors.Is(err, runtime.ErrNotFound) {
			return fmt.Errorf("a refused tool result was stored (%v)", err)
		}
		return nil
	})
}
