package sdk_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
	"github.com/stretchr/testify/require"
)

func init() {
	// demo-eager serves the demo with every request started on the
	// reader (jsonrpc.Options.Eager), task.run included, which the SDK
	// hands to a goroutine.
	children["demo-eager"] = func() {
		sdk.SetEagerServing("all")
		ext := (&demo{}).extension()
		ext.Logf = nil
		if err := sdk.Serve(ext); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	// demo-blocking serves the demo over os.Stdin and os.Stdout, both
	// blocking (Serve reads stdin blocking and writes stdout through the
	// poller).
	children["demo-blocking"] = func() {
		ext := (&demo{}).extension()
		ext.Logf = nil
		out := sdk.TakeStdout()
		if err := sdk.ServeConn(context.Background(), os.Stdin, out, ext); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// BenchmarkServeRoundTrip measures one host call to an SDK extension in a
// child process, in the same run: over blocking stdio and as Serve serves
// (demo), and with every request started on the reader (demo-eager),
// for a Func (task.run, in a goroutine under demo) and a PureFunc
// (validate, on the reader under both).
func BenchmarkServeRoundTrip(b *testing.B) {
	calls := []struct {
		name   string
		method string
		params any
	}{
		{"task", "task.run", protocol.TaskRunParams{Task: "demo-sweep"}},
		{"validate", "validate", protocol.ValidateParams{Kind: protocol.ValidateExtension, Type: "demo", ScopeID: "s", ID: "e"}},
	}
	for _, child := range []string{"demo-blocking", "demo", "demo-eager"} {
		for _, c := range calls {
			b.Run(child+"/"+c.name, func(b *testing.B) {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), sdkChildEnv+"="+child)
				p, err := sdktest.Start(cmd, sdktest.New())
				require.NoError(b, err)
				b.Cleanup(func() { p.Conn.Close(); _ = p.Err() })
				ctx := b.Context()
				require.NoError(b, p.Conn.Call(ctx, "initialize", initParams, nil))
				require.NoError(b, p.Conn.Call(ctx, "configure", protocol.ConfigureParams{KV: protocol.KVLayout{Stored: 2, Declared: 2}}, nil))
				require.NoError(b, p.Conn.Call(ctx, c.method, c.params, nil))
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					start := time.Now()
					if err := p.Conn.Call(ctx, c.method, c.params, nil); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2])/float64(time.Microsecond), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100])/float64(time.Microsecond), "p99-µs")
			})
		}
	}
}
