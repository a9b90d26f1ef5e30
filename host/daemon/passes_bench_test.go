package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// staticSource serves the same items on one complete page, every scan.
type staticSource struct{ page runtime.ReconcilePage }

func newStaticSource(n int) *staticSource {
	s := &staticSource{page: runtime.ReconcilePage{Complete: true, Checkpoint: "c1"}}
	for i := range n {
		item := fmt.Sprintf("item-%05d", i)
		body, _ := json.Marshal(map[string]any{"title": "note " + item, "body": "an unchanged note of a few words", "n": i})
		s.page.Observations = append(s.page.Observations, runtime.Observation{Item: item, Version: "v1",
			Envelope: runtime.Envelope{DeliveryID: item + "@v1", Family: "bench.item", Type: "bench.item.observed", Payload: body}})
	}
	return s
}

func (s *staticSource) Push(context.Context, runtime.Delivery) ([]runtime.Envelope, error) {
	return nil, fmt.Errorf("%w: push", runtime.ErrUnsupported)
}

func (s *staticSource) Reconcile(context.Context, runtime.ReconcileRequest) (runtime.ReconcilePage, error) {
	return s.page, nil
}

// BenchmarkReconcileUnchangedPageRatio scans a source whose one page of
// 1,000 items the snapshot already holds, and reads 1,000 items from the
// store one by one in one read transaction, in alternation on the same
// store: the bound is a reconcile page ≤ 2× the reads ("ratio").
func BenchmarkReconcileUnchangedPageRatio(b *testing.B) {
	const items = 1_000
	st, err := sqlite.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if err := st.Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutScope(runtime.Scope{ID: "s1"})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	eng, err := runtime.New(runtime.Config{Store: st, Sources: map[string]runtime.Source{
		"bench": {ScopeID: "s1", Ingress: newStaticSource(items), PageLimit: items}}})
	if err != nil {
		b.Fatal(err)
	}
	if rep, err := eng.Reconcile(ctx, "bench"); err != nil || len(rep.Accepted) != items {
		b.Fatalf("seeding scan: %d accepted, %v", len(rep.Accepted), err)
	}
	// The keys the reads read: the snapshot's own entries.
	var keys []string
	if err := st.View(ctx, func(r runtime.ReadTx) error {
		entries, err := r.KVList(runtime.NamespaceIngress, "", "", runtime.MaxPageLimit)
		for _, e := range entries {
			keys = append(keys, e.Key)
		}
		return err
	}); err != nil || len(keys) < items {
		b.Fatalf("snapshot of %d entries: %v", len(keys), err)
	}
	keys = keys[:items]
	scan := func() time.Duration {
		start := time.Now()
		rep, err := eng.Reconcile(ctx, "bench")
		if err != nil || rep.Unchanged != items || !rep.Complete {
			b.Fatalf("scan: %d unchanged, complete %v: %v", rep.Unchanged, rep.Complete, err)
		}
		return time.Since(start)
	}
	read := func() time.Duration {
		start := time.Now()
		err := st.View(ctx, func(r runtime.ReadTx) error {
			for _, k := range keys {
				if _, found, err := r.KVGet(runtime.NamespaceIngress, k); err != nil || !found {
					return fmt.Errorf("read %q: found %v, %v", k, found, err)
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var scanTotal, readTotal time.Duration
	b.ResetTimer()
	for b.Loop() {
		scanTotal += scan()
		readTotal += read()
	}
	n := float64(b.N)
	b.ReportMetric(float64(scanTotal.Nanoseconds())/n, "ns/reconcile-page")
	b.ReportMetric(float64(readTotal.Nanoseconds())/n, "ns/read-page")
	b.ReportMetric(float64(scanTotal)/float64(readTotal), "ratio")
}
