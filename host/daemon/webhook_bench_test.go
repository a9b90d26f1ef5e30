package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/runtime"
)

// webhookSenders is how many senders deliver at once.
const webhookSenders = 32

// BenchmarkWebhookNotes delivers b.N signed one-note webhooks to notes
// (a real process: HTTP, webhook.handle with its HMAC check, durable
// acceptance) from 32 concurrent senders, then accepts b.N envelopes of
// the same size straight into the same store in batches of 32 per
// transaction (the store's own batched acceptance), and reports both
// rates, their ratio (issue 12 asks ≥ 0.5) and the webhook's p50 and p99
// latency to 2xx.
func BenchmarkWebhookNotes(b *testing.B) {
	w := openWebhookDaemon(b)
	transport := &http.Transport{MaxIdleConnsPerHost: webhookSenders, MaxConnsPerHost: webhookSenders}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport}
	var next atomic.Int64
	var run atomic.Int64 // keeps identities fresh across b.N rounds
	round := run.Add(1)

	commits0, delivered0 := w.d.webhooks.accept.commits.Load(), w.d.webhooks.accept.delivered.Load()
	b.ResetTimer()
	latencies := make([][]time.Duration, webhookSenders)
	var failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for s := range webhookSenders {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				body := fmt.Sprintf(`{"notes":[{"id":"b%d-%d","rev":"1","title":"note %d"}]}`, round, i, i)
				req, _ := http.NewRequest(http.MethodPost, w.url, strings.NewReader(body))
				req.Header.Set("X-Notes-Signature", sdk.SignHMACSHA256([]byte(webhookSecret), []byte(body)))
				t0 := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				var a webhookAnswer
				_ = json.NewDecoder(resp.Body).Decode(&a)
				_, _ = io.Copy(io.Discard, resp.Body) // to EOF, so the connection is reused
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || a.Accepted != 1 {
					failed.Add(1)
					continue
				}
				latencies[s] = append(latencies[s], time.Since(t0))
			}
		})
	}
	wg.Wait()
	webhookTook := time.Since(start)
	commits := w.d.webhooks.accept.commits.Load() - commits0
	delivered := w.d.webhooks.accept.delivered.Load() - delivered0
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d deliveries failed", n, b.N)
	}

	// The store's own batched acceptance, same store, same sizes.
	env := func(i int) runtime.Envelope {
		return runtime.Envelope{Source: "bench/baseline", DeliveryID: fmt.Sprintf("b%d-%d", round, i), ScopeID: "team",
			Family: "notes.note", Type: "note", Schema: "notes.note.v3",
			Payload: json.RawMessage(fmt.Sprintf(`{"id":"b%d-%d","title":"note %d","tags":[]}`, round, i, i))}
	}
	start = time.Now()
	for i := 0; i < b.N; i += webhookSenders {
		batch := make([]runtime.Envelope, 0, webhookSenders)
		for j := i; j < min(i+webhookSenders, b.N); j++ {
			batch = append(batch, env(j))
		}
		if _, err := w.d.Engine().Accept(context.Background(), batch...); err != nil {
			b.Fatal(err)
		}
	}
	storeTook := time.Since(start)
	b.StopTimer()

	all := slices.Concat(latencies...)
	slices.Sort(all)
	webhookRate := float64(b.N) / webhookTook.Seconds()
	storeRate := float64(b.N) / storeTook.Seconds()
	b.ReportMetric(webhookRate, "webhook-events/s")
	b.ReportMetric(storeRate, "store-batched-events/s")
	b.ReportMetric(webhookRate/storeRate, "ratio")
	b.ReportMetric(float64(all[len(all)*50/100].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[min(len(all)*99/100, len(all)-1)].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(delivered)/float64(max(commits, 1)), "deliveries/commit")
	b.ReportMetric(0, "ns/op")
}
