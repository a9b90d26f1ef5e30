package jsonrpc_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/stretchr/testify/require"
)

// The benchmarks run against a real child process (the test binary
// re-executed). BenchmarkPipeRoundTrip measures the same pipes without
// JSON-RPC in the same run, so the figures can be read as ratios.

// startPeerConn starts a transport peer (a child of main_test.go) and
// connects to it.
func startPeerConn(b *testing.B, name string) *jsonrpc.Conn {
	b.Helper()
	c, err := startChild(context.Background(), name) // stopped gracefully at cleanup
	require.NoError(b, err)
	conn := jsonrpc.NewConn(c.stdout, c.stdin, jsonrpc.Methods{
		"host.echo": func(_ context.Context, req *jsonrpc.Request) (any, error) { return req.Params, nil },
	}, nil)
	b.Cleanup(func() {
		_ = conn.Close()
		_ = c.stop()
	})
	// One call first, so the figures leave out the child's start.
	require.NoError(b, conn.Call(b.Context(), "test.echo", []int{0}, nil))
	return conn
}

// reportLatencies adds p50 and p99 in microseconds.
func reportLatencies(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	us := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))]) / float64(time.Microsecond) }
	b.ReportMetric(us(0.50), "p50-µs")
	b.ReportMetric(us(0.99), "p99-µs")
}

// BenchmarkEcho runs the echo against a peer serving it in a goroutine
// per request and against one serving it on its reader (Options.Inline),
// in the same run.
func BenchmarkEcho(b *testing.B) {
	b.Run("goroutine", func(b *testing.B) { benchmarkEcho(b, "peer") })
	b.Run("inline", func(b *testing.B) { benchmarkEcho(b, "peer-inline") })
}

func benchmarkEcho(b *testing.B, peer string) {
	conn := startPeerConn(b, peer)
	params := map[string]string{"text": "hello, extension"}
	var out map[string]string
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := conn.Call(b.Context(), "test.echo", params, &out); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

// BenchmarkHostCallback: one host request whose handler calls the host
// back b.N times; ns/op is the cost of one callback. The handler runs in a
// goroutine of its own, its calls' answers handed over by the reader, and
// started on the reader (Options.Eager), its calls, made with its own
// context, reading their answers themselves, in the same run.
func BenchmarkHostCallback(b *testing.B) {
	b.Run("goroutine", func(b *testing.B) { benchmarkHostCallback(b, "peer") })
	b.Run("eager", func(b *testing.B) { benchmarkHostCallback(b, "peer-eager") })
}

func benchmarkHostCallback(b *testing.B, peer string) {
	conn := startPeerConn(b, peer)
	b.ResetTimer()
	start := time.Now()
	var res struct {
		Count int `json:"count"`
	}
	if err := conn.Call(b.Context(), "test.callback", map[string]int{"n": b.N}, &res); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if res.Count != b.N {
		b.Fatalf("%d callbacks, want %d", res.Count, b.N)
	}
	b.ReportMetric(float64(elapsed)/float64(time.Microsecond)/float64(b.N), "µs/callback")
}

// BenchmarkArtifact uploads 64 KiB chunks, each acknowledged before the
// next; MB/s is the throughput.
func BenchmarkArtifact(b *testing.B) {
	b.Run("goroutine", func(b *testing.B) { benchmarkArtifact(b, "peer") })
	b.Run("inline", func(b *testing.B) { benchmarkArtifact(b, "peer-inline") })
	// The caller scanning every chunk it encodes for the strict rule, as
	// before encodesStrict, for the ratio in the same run.
	b.Run("inline-scanned", func(b *testing.B) {
		b.Cleanup(jsonrpc.SetAlwaysCheckStrict(true))
		benchmarkArtifact(b, "peer-inline")
	})
}

func benchmarkArtifact(b *testing.B, peer string) {
	conn := startPeerConn(b, peer)
	chunk := testChunk()
	type chunkParams struct {
		Upload string `json:"upload"`
		Offset int64  `json:"offset"`
		Data   []byte `json:"data"`
	}
	var ack struct {
		Bytes int64 `json:"bytes"`
	}
	upload := fmt.Sprintf("bench-%d", b.N)
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	for i := range b.N {
		in := chunkParams{Upload: upload, Offset: int64(i * len(chunk)), Data: chunk}
		if err := conn.Call(b.Context(), "artifact.write", in, &ack); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if ack.Bytes != int64(b.N*len(chunk)) {
		b.Fatalf("acknowledged %d bytes, want %d", ack.Bytes, b.N*len(chunk))
	}
}

// BenchmarkPipeRoundTrip is the baseline: the same pipes to a child that
// answers raw lines, with no JSON at all.
func BenchmarkPipeRoundTrip(b *testing.B) {
	run := func(b *testing.B, child string, line []byte) {
		c, err := startChild(context.Background(), child)
		require.NoError(b, err)
		b.Cleanup(func() { _ = c.stop() })
		br := bufio.NewReaderSize(c.stdout, 1<<20)
		lat := make([]time.Duration, 0, b.N)
		if len(line) > 1024 {
			b.SetBytes(int64(len(line)))
		}
		b.ResetTimer()
		for range b.N {
			start := time.Now()
			if _, err := c.stdin.Write(line); err != nil {
				b.Fatal(err)
			}
			if _, err := br.ReadSlice('\n'); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		reportLatencies(b, lat)
	}
	b.Run("echo", func(b *testing.B) { run(b, "raw-echo", []byte("hello, extension\n")) })
	// A 64 KiB chunk as base64 text, acknowledged by a short line.
	chunk := base64.StdEncoding.AppendEncode(nil, make([]byte, 64<<10))
	b.Run("chunk-64KiB", func(b *testing.B) { run(b, "raw-ack", append(chunk, '\n')) })
}

// testChunk is an artifact chunk of the size the SDK writes (64 KiB), of
// bytes that are not all one value, for the benchmarks and tests that
// send or decode one.
func testChunk() []byte {
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	return chunk
}
