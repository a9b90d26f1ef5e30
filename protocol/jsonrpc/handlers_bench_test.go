//go:build unix

package jsonrpc_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// BenchmarkHandlerGoroutines is a round trip to a handler run in a
// goroutine (not Inline) over os.Pipe in one process, with a new goroutine
// for every request ("fresh", as before parked handlers) and with parked
// ones reused ("parked"), in the same run. cpu-µs/op is the process's CPU
// time, which the machine's other work inflates less than wall time.
func BenchmarkHandlerGoroutines(b *testing.B) {
	handler := func(_ context.Context, req *jsonrpc.Request) (any, error) {
		var v map[string]any
		_ = json.Unmarshal(req.Params, &v) // some stack depth, as a real handler has
		return req.Params, nil
	}
	for _, c := range []struct {
		name   string
		parked int32
	}{{"fresh", 0}, {"parked", 8}} {
		b.Run(c.name, func(b *testing.B) {
			b.Cleanup(jsonrpc.SetMaxIdleHandlers(c.parked))
			h, _ := pipePair(b, nil, jsonrpc.Methods{"echo": handler}, nil, nil)
			cpu := cpuTime()
			b.ResetTimer()
			for range b.N {
				if err := h.Call(b.Context(), "echo", map[string]string{"text": "hello"}, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}
