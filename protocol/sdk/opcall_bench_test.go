package sdk_test

import (
	"context"
	"encoding/json"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
	"github.com/stretchr/testify/require"
)

// BenchmarkOperationCallEcho is the full stack's echo with the processes
// left out: an operation.call to an SDK extension served by ServeConn over
// a pair of pipes in this process, against the same echo served by a bare
// Conn on the reader (the transport alone), in the same run. The ratio of
// the two is what the SDK's dispatch adds to the transport; one CPU
// profile covers both ends (go test -bench OperationCallEcho -cpuprofile).
// sdk serves operation.call as ServeConn does, started on the reader;
// sdk-goroutine hands it to a goroutine at once, as the SDK did before.
func BenchmarkOperationCallEcho(b *testing.B) {
	input := json.RawMessage(`{"seq":1,"text":"hello, extension \u00e9\"\\\n"}`)
	pipes := func(b *testing.B) (hostR, hostW, extR, extW *os.File) {
		hostR, extW, err := os.Pipe()
		require.NoError(b, err)
		extR, hostW, err = os.Pipe()
		require.NoError(b, err)
		return
	}
	b.Run("transport", func(b *testing.B) {
		hostR, hostW, extR, extW := pipes(b)
		ext := jsonrpc.NewConn(extR, extW, jsonrpc.Methods{"bench.echo": func(_ context.Context, req *jsonrpc.Request) (any, error) {
			return json.RawMessage(req.Params), nil
		}}, &jsonrpc.Options{ReuseParams: true, Inline: func(string, json.RawMessage) bool { return true }})
		host := jsonrpc.NewConn(hostR, hostW, nil, nil)
		b.Cleanup(func() { host.Close(); ext.Close() })
		var out json.RawMessage
		b.ResetTimer()
		cpu := processCPU()
		for range b.N {
			if err := host.Call(b.Context(), "bench.echo", input, &out); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu)
	})
	sdkEcho := func(b *testing.B) {
		hostR, hostW, extR, extW := pipes(b)
		ext := &sdk.Extension{
			Manifest: []byte(`{"name":"bench","version":"1.0.0","command":["bench"],"protocol":[1],` +
				`"provides":{"operations":[{"name":"bench.echo","kind":"handler"}]}}`),
			Operations: map[string]sdk.Operation{"bench.echo": {Handler: func(_ context.Context, _ *sdk.Host, c protocol.OperationCallParams) (protocol.OperationCallResult, error) {
				return protocol.OperationCallResult{Output: c.Input}, nil
			}}},
			Logf: func(string, ...any) {},
		}
		done := make(chan error, 1)
		go func() { done <- sdk.ServeConn(context.Background(), extR, extW, ext) }()
		host := jsonrpc.NewConn(hostR, hostW, sdktest.New().Handler(), &jsonrpc.Options{DecodeError: sdk.DecodeError})
		b.Cleanup(func() { host.Close(); <-done })
		ctx := b.Context()
		require.NoError(b, host.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}}, nil))
		params := protocol.OperationCallParams{Operation: "bench.echo", Input: input, Authority: protocol.Authority{ScopeID: "bench"}}
		var out protocol.OperationCallResult
		b.ResetTimer()
		cpu := processCPU()
		for range b.N {
			if err := host.Call(ctx, "operation.call", params, &out); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu)
	}
	b.Run("sdk", sdkEcho)
	b.Run("sdk-goroutine", func(b *testing.B) {
		b.Cleanup(sdk.SetEagerServing("none"))
		sdkEcho(b)
	})
}

// processCPU is the CPU time this process has used; both ends of the
// benchmark run in it, so a load elsewhere on the machine, which moves
// the latency, does not move it (the scheduler's spinning does, a little).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64(processCPU()-since)/float64(b.N), "cpu-ns/op")
}
