//go:build unix

package jsonrpc_test

import (
	"encoding/json"
	"io"
	"syscall"
	"testing"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// BenchmarkEncodeChunk is the sender's side of one 64 KiB artifact chunk:
// encoding its params and writing the line (to io.Discard). "scanned"
// scans the encoded value for the strict rule, as every value was before
// encodesStrict; "typed" skips the scan for a type that cannot break it.
func BenchmarkEncodeChunk(b *testing.B) {
	type chunkParams struct {
		Upload string `json:"upload"`
		Offset int64  `json:"offset"`
		Data   []byte `json:"data"`
	}
	chunk := testChunk()
	r, w := io.Pipe()
	b.Cleanup(func() { _ = w.Close() })
	conn := jsonrpc.NewConn(r, discard{}, nil, nil)
	b.Cleanup(func() { _ = conn.Close() })
	run := func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		cpu := cpuTime()
		for i := range b.N {
			if err := conn.Notify(b.Context(), "artifact.write", chunkParams{Upload: "u", Offset: int64(i), Data: chunk}); err != nil {
				b.Fatal(err)
			}
		}
		// CPU time is what the process spent, which a loaded machine's
		// other work does not inflate as it does wall time.
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e3, "cpu-µs/op")
	}
	b.Run("scanned", func(b *testing.B) {
		b.Cleanup(jsonrpc.SetAlwaysCheckStrict(true))
		run(b)
	})
	b.Run("typed", run)
	// protocol.ArtifactWriteParams, which appends itself (Appender): its
	// base64 straight into the message; "appender-scanned" then scans it
	// for the strict rule and its line breaks, as before it declared its
	// output strict (StrictAppender), "appender" takes it as it is.
	appender := func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		cpu := cpuTime()
		for i := range b.N {
			if err := conn.Notify(b.Context(), "artifact.write", protocol.ArtifactWriteParams{ArtifactID: "u", Offset: int64(i), Data: chunk}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e3, "cpu-µs/op")
	}
	b.Run("appender-scanned", func(b *testing.B) {
		b.Cleanup(jsonrpc.SetAlwaysCheckStrict(true))
		appender(b)
	})
	b.Run("appender", appender)
}

// cpuTime is the process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// discard is io.Discard as a WriteCloser.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }

// BenchmarkEncodeOperationCall is the encoding of the prototype's echo on
// both ends: the host's operation.call params and the extension's result,
// each written as a message (to io.Discard). "scanned" takes them as any
// Appender (AppendJSON checks the raw member, then the Conn scans the
// whole and its line breaks), as before they were RawAppenders; "raw"
// scans the raw member alone, once.
func BenchmarkEncodeOperationCall(b *testing.B) {
	input := json.RawMessage(`{"seq":12345,"text":"hello, extension \u00e9\"\\\n"}`)
	r, w := io.Pipe()
	b.Cleanup(func() { _ = w.Close() })
	conn := jsonrpc.NewConn(r, discard{}, nil, nil)
	b.Cleanup(func() { _ = conn.Close() })
	for _, v := range []struct {
		name  string
		value any
	}{
		{"params", protocol.OperationCallParams{Operation: "bench.echo", Input: input, Authority: protocol.Authority{ScopeID: "bench"}}},
		{"result", protocol.OperationCallResult{Output: input}},
	} {
		run := func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if err := conn.Notify(b.Context(), "m", v.value); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(v.name+"/scanned", func(b *testing.B) {
			b.Cleanup(jsonrpc.SetAlwaysCheckStrict(true))
			run(b)
		})
		b.Run(v.name+"/raw", run)
	}
}
