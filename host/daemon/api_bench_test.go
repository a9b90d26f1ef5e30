package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/runtime"
)

// BenchmarkAPIEventsPage reads one page of 100 Events of a scope through
// the whole API (client, unix socket, handler, indexed store read) on a
// store of 1,000 and of 100,000 Events: a read costs what it returns, so
// the two should cost the same (the bound is ≤ 1.5×).
func BenchmarkAPIEventsPage(b *testing.B) {
	for _, size := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("store=%d", size), func(b *testing.B) {
			be, c := newAPITest(b)
			fillEvents(b, be.store, size)
			ctx := context.Background()
			// The page starts in the middle of scope-a's log, half the
			// store's Events being of another scope.
			q := client.EventQuery{Scope: apiScope, After: int64(size / 2), Limit: 100}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				page, err := c.Events(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Events) != 100 {
					b.Fatalf("page of %d events", len(page.Events))
				}
			}
		})
	}
}

// fillEvents accepts n Events, alternating between two scopes, in large
// transactions.
func fillEvents(b *testing.B, s runtime.Store, n int) {
	b.Helper()
	const batch = 5_000
	payload := json.RawMessage(`{"item":"7","title":"an event of the benchmark"}`)
	for start := 0; start < n; start += batch {
		err := s.Transact(context.Background(), func(tx runtime.Tx) error {
			for i := start; i < min(start+batch, n); i++ {
				scope := apiScope
				if i%2 == 1 {
					scope = "scope-b"
				}
				env := runtime.Envelope{Source: "bench", DeliveryID: fmt.Sprintf("d%d", i), ScopeID: scope,
					Family: "items", Type: "noise", Payload: payload}
				if _, _, err := tx.AcceptEvent(env); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAPIEventsPageRatio reads the same page from a 1,000-event and
// a 100,000-event store in alternation, so both see the same machine load,
// and reports each page's cost and their ratio (the bound: ≤ 1.5).
func BenchmarkAPIEventsPageRatio(b *testing.B) {
	small, smallClient := newAPITest(b)
	fillEvents(b, small.store, 1_000)
	big, bigClient := newAPITest(b)
	fillEvents(b, big.store, 100_000)
	ctx := context.Background()
	read := func(c *client.Client, size int) time.Duration {
		start := time.Now()
		page, err := c.Events(ctx, client.EventQuery{Scope: apiScope, After: int64(size / 2), Limit: 100})
		if err != nil {
			b.Fatal(err)
		}
		if len(page.Events) != 100 {
			b.Fatalf("page of %d events", len(page.Events))
		}
		return time.Since(start)
	}
	var smallTotal, bigTotal time.Duration
	b.ResetTimer()
	for b.Loop() {
		smallTotal += read(smallClient, 1_000)
		bigTotal += read(bigClient, 100_000)
	}
	n := float64(b.N)
	b.ReportMetric(float64(smallTotal.Nanoseconds())/n, "ns/page-1k")
	b.ReportMetric(float64(bigTotal.Nanoseconds())/n, "ns/page-100k")
	b.ReportMetric(float64(bigTotal)/float64(smallTotal), "ratio")
}
