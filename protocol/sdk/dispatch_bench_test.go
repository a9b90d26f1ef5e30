package sdk

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// BenchmarkDispatchOperationCall is the SDK's own part of serving an
// operation.call over the wire, with no transport or system call around
// it: the dispatch from the params as they arrive to the result's JSON as
// the transport copies or appends it (its strict check, the same scan of
// the same bytes either way, left out). Unlike the echo benchmarks it
// moves little on a loaded machine.
func BenchmarkDispatchOperationCall(b *testing.B) {
	ext := &Extension{
		Manifest: []byte(`{"name":"bench","version":"1.0.0","command":["bench"],"protocol":[1],` +
			`"provides":{"operations":[{"name":"bench.echo","kind":"handler"}]}}`),
		Operations: map[string]Operation{"bench.echo": {Handler: func(_ context.Context, _ *Host, c protocol.OperationCallParams) (protocol.OperationCallResult, error) {
			return protocol.OperationCallResult{Output: c.Input}, nil
		}}},
		Logf: func(string, ...any) {},
	}
	s, err := newServer(ext, CallerFunc(func(context.Context, string, any, any) error { return nil }))
	if err != nil {
		b.Fatal(err)
	}
	s.state = stateReady
	// The params as ServeConn passes them: the transport's request.
	req := &jsonrpc.Request{Method: "operation.call", Params: json.RawMessage(`{"operation":"bench.echo","input":{"seq":1,"text":"hello, extension \u00e9\"\\\n"},"authority":{"scope_id":"bench"}}`)}
	ctx := context.Background()
	var out []byte
	b.ReportAllocs()
	for i := range b.N {
		res, err := s.call(ctx, uint64(i+1), "operation.call", req)
		if err != nil {
			b.Fatal(err)
		}
		switch v := res.(type) {
		case jsonrpc.Appender:
			out, err = v.AppendJSON(out[:0])
		case json.RawMessage:
			out = append(out[:0], v...)
		default:
			b.Fatalf("a result of %T", res)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServedInline is what deciding to serve operation.call Inline
// costs ServeConn's reader on every such call (server.servedInline): the
// scan of the params for the operation's name, and one lookup. Its cost
// grows with the params, as every member is read (the input's string
// found by its end), so it is taken for a small call, as the echo's, and
// for one whose 64 KiB input comes before the name.
func BenchmarkServedInline(b *testing.B) {
	ext := &Extension{
		Manifest: []byte(`{"name":"bench","version":"1.0.0","command":["bench"],"protocol":[1],` +
			`"provides":{"operations":[{"name":"bench.echo","kind":"handler"}]}}`),
		Operations: map[string]Operation{"bench.echo": {Pure: func(c protocol.OperationCallParams) (protocol.OperationCallResult, error) {
			return protocol.OperationCallResult{Output: c.Input}, nil
		}}},
		Logf: func(string, ...any) {},
	}
	s, err := newServer(ext, CallerFunc(func(context.Context, string, any, any) error { return nil }))
	if err != nil {
		b.Fatal(err)
	}
	long := make([]byte, 64<<10)
	for i := range long {
		long[i] = 'a' + byte(i%26)
	}
	for _, c := range []struct{ name, params string }{
		{"echo", `{"operation":"bench.echo","request_id":"r-1","input":{"seq":1,"text":"hello, extension"},"authority":{"scope_id":"bench","work_id":"w"}}`},
		{"64KiB-input-first", `{"input":{"text":"` + string(long) + `"},"operation":"bench.echo","authority":{"scope_id":"bench"}}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			params := json.RawMessage(c.params)
			b.SetBytes(int64(len(params)))
			b.ReportAllocs()
			for range b.N {
				if !s.servedInline("operation.call", params) {
					b.Fatal("not served inline")
				}
			}
		})
	}
}
