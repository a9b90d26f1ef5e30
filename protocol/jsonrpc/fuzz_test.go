package jsonrpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

// FuzzStrictJSON checks the strict JSON rule (strict.go) from both sides
// on arbitrary input. What it accepts is JSON whose bytes are UTF-8 and
// whose numbers all fit a float64; what it refuses is valid JSON only when
// the input shows a reason: a byte that is not UTF-8, an escape of a
// surrogate half, or a number a float64 cannot hold. The seed corpus is
// under testdata/fuzz/FuzzStrictJSON.
func FuzzStrictJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		err := jsonrpc.CheckStrict(data)
		valid := json.Valid(data)
		if !valid {
			if err == nil {
				t.Fatalf("CheckStrict(%q) accepts what is not JSON", data)
			}
			return
		}
		overflow := numbersOverflow(t, data)
		surrogate := surrogateEscape.Match(data)
		if err == nil && (!utf8.Valid(data) || overflow) {
			t.Fatalf("CheckStrict(%q) accepts invalid UTF-8 or a number beyond float64", data)
		}
		if err != nil && utf8.Valid(data) && !overflow && !surrogate {
			t.Fatalf("CheckStrict(%q) refuses strict JSON: %v", data, err)
		}
		if err != nil && !utf8.ValidString(err.Error()) {
			t.Fatalf("CheckStrict(%q)'s refusal is not UTF-8: %q", data, err.Error())
		}
	})
}

// surrogateEscape matches the text of a \u escape of a surrogate half,
// possibly preceded by an escaped backslash (which over-approximates, as
// the fuzz target needs).
var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F][0-9a-fA-F]{2}`)

// numbersOverflow reports whether valid JSON data holds a number that does
// not fit a float64.
func numbersOverflow(t *testing.T, data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if n, ok := tok.(json.Number); ok {
			if _, err := strconv.ParseFloat(string(n), 64); errors.Is(err, strconv.ErrRange) {
				return true
			}
		}
	}
}

func TestValidJSONDepthMatchesEncodingJSON(t *testing.T) {
	for _, n := range []int{1, 9999, 10000, 10001} {
		data := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
		if got, want := jsonrpc.ValidJSON(data), json.Valid(data); got != want {
			t.Errorf("depth %d: ValidJSON = %v, encoding/json says %v", n, got, want)
		}
	}
}
