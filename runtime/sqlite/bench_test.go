package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

func benchEnvelope(i int, scope string) runtime.Envelope {
	return runtime.Envelope{
		Source: "bench", DeliveryID: fmt.Sprintf("d-%d", i), ScopeID: scope, Family: "bench",
		Type: "bench.event", Schema: "bench.event.v1",
		Payload: json.RawMessage(fmt.Sprintf(`{"n":%d,"title":"event number %d","labels":["a","b"]}`, i, i)),
	}
}

func BenchmarkAcceptEvent(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := openStore(b, b.TempDir())
			ctx := context.Background()
			n := 0
			for b.Loop() {
				err := s.Transact(ctx, func(tx runtime.Tx) error {
					for range batch {
						n++
						if _, _, err := tx.AcceptEvent(benchEnvelope(n, "scope")); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

func BenchmarkKVCommit(b *testing.B) {
	s := openStore(b, b.TempDir())
	ctx := context.Background()
	version := ""
	n := 0
	for b.Loop() {
		n++
		value := []byte(fmt.Sprintf(`{"counter":%d}`, n))
		pre := runtime.KVPrecondition{Namespace: "bench", Key: "counter", Version: version}
		if version == "" {
			pre = runtime.KVPrecondition{Namespace: "bench", Key: "counter", Absent: true}
		}
		err := s.Transact(ctx, func(tx runtime.Tx) error {
			return tx.KVCommit(runtime.KVBatch{
				Preconditions: []runtime.KVPrecondition{pre},
				Puts: []runtime.KVPut{
					{Namespace: "bench", Key: "counter", Value: value},
					{Namespace: "bench", Key: fmt.Sprintf("log/%08d", n), Value: value},
				},
			})
		})
		if err != nil {
			b.Fatal(err)
		}
		version = runtime.KVVersion(value)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "commits/s")
}

// Stores for the page benchmarks, built once per run and removed by
// TestMain.
var (
	benchMu     sync.Mutex
	benchStores = map[string]*sqlite.Store{}
	benchRoot   string
)

const pageScope = "target"

// benchStore returns a store of total events of which every every-th
// belongs to pageScope and the rest to 97 other scopes.
func benchStore(b *testing.B, total, every int) *sqlite.Store {
	benchMu.Lock()
	defer benchMu.Unlock()
	name := fmt.Sprintf("%d-%d", total, every)
	if s, ok := benchStores[name]; ok {
		return s
	}
	if benchRoot == "" {
		var err error
		if benchRoot, err = os.MkdirTemp("", "open-conduit-bench-"); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	s, err := sqlite.Open(filepath.Join(benchRoot, name))
	if err != nil {
		b.Fatal(err)
	}
	const perTx = 2000
	for base := 0; base < total; base += perTx {
		err := s.Transact(context.Background(), func(tx runtime.Tx) error {
			for i := base; i < min(base+perTx, total); i++ {
				scope := fmt.Sprintf("other-%d", i%97)
				if i%every == 0 {
					scope = pageScope
				}
				if _, _, err := tx.AcceptEvent(benchEnvelope(i, scope)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("built a %d-event store (1 in %d in scope %s) in %v", total, every, pageScope, time.Since(start).Round(time.Millisecond))
	benchStores[name] = s
	return s
}

func removeBenchStores() {
	benchMu.Lock()
	defer benchMu.Unlock()
	for _, s := range benchStores {
		s.Close()
	}
	if benchRoot != "" {
		os.RemoveAll(benchRoot)
	}
}

func readPage(b *testing.B, s *sqlite.Store, after int64) time.Duration {
	start := time.Now()
	err := s.View(context.Background(), func(tx runtime.ReadTx) error {
		page, err := tx.ScopeEvents(pageScope, after, 100)
		if err == nil && len(page) != 100 {
			err = fmt.Errorf("page of %d events, want 100", len(page))
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkScopeEventsPage reads one page of 100 of a scope's events on a
// 1,000-event store where the scope owns 10% (the baseline) and on a
// 100,000-event store where it owns 1%, and reports the ratio of the two:
// with the (scope_id, sequence) index a page costs what it returns, so the
// ratio stays near 1.
func BenchmarkScopeEventsPage(b *testing.B) {
	small := benchStore(b, 1_000, 10)
	large := benchStore(b, 100_000, 100)
	b.Run("events=1000", func(b *testing.B) {
		for b.Loop() {
			readPage(b, small, 0)
		}
	})
	b.Run("events=100000", func(b *testing.B) {
		for b.Loop() {
			readPage(b, large, 0)
		}
	})
	b.Run("ratio", func(b *testing.B) {
		var smallT, largeT time.Duration
		for b.Loop() {
			smallT += readPage(b, small, 0)
			largeT += readPage(b, large, 0)
		}
		b.ReportMetric(float64(smallT.Nanoseconds())/float64(b.N), "ns/page-1k")
		b.ReportMetric(float64(largeT.Nanoseconds())/float64(b.N), "ns/page-100k")
		b.ReportMetric(float64(largeT)/float64(smallT), "ratio-100k/1k")
	})
}

// BenchmarkCommitSync compares one small KV write committed synced
// (Transact) and deferred (TransactDeferSync) on the same store.
func BenchmarkCommitSync(b *testing.B) {
	for _, mode := range []string{"synced", "deferred"} {
		b.Run(mode, func(b *testing.B) {
			s := openStore(b, b.TempDir())
			ctx := context.Background()
			commit := s.Transact
			if mode == "deferred" {
				commit = s.TransactDeferSync
			}
			n := 0
			for b.Loop() {
				n++
				err := commit(ctx, func(tx runtime.Tx) error {
					return tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{
						{Namespace: "bench", Key: "counter", Value: []byte(fmt.Sprint(n))},
					}})
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
