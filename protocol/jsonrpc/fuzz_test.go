package jsonrpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// FuzzConnFrames feeds arbitrary bytes to a Conn as the peer's stream: the
// reader must never panic, and must end (Done) once the input does. The
// seed corpus is under testdata/fuzz/FuzzConnFrames.
func FuzzConnFrames(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		h := jsonrpc.Methods{
			"echo": func(_ context.Context, req *jsonrpc.Request) (any, error) { return req.Params, nil },
			"block": func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			},
			"call": func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
				return nil, jsonrpc.ConnFromContext(ctx).Call(ctx, "back", nil, nil)
			},
		}
		conn := jsonrpc.NewConn(bytes.NewReader(data), io.Discard, h, &jsonrpc.Options{MaxMessageBytes: 256})
		select {
		case <-conn.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the reader did not end after the end of its input")
		}
		if conn.Err() == nil {
			t.Fatal("Done without Err")
		}
	})
}

// FuzzValidJSON checks the transport's single-pass validator against
// encoding/json on arbitrary input.
func FuzzValidJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := jsonrpc.ValidJSON(data), json.Valid(data); got != want {
			t.Fatalf("ValidJSON(%q) = %v, encoding/json says %v", data, got, want)
		}
	})
}

func TestValidJSONDepthMatchesEncodingJSON(t *testing.T) {
	for _, n := range []int{1, 9999, 10000, 10001} {
		data := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
		if got, want := jsonrpc.ValidJSON(data), json.Valid(data); got != want {
			t.Errorf("depth %d: ValidJSON = %v, encoding/json says %v", n, got, want)
		}
	}
}
