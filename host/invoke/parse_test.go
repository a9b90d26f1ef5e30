package invoke_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host/invoke"
)

func TestParseParams(t *testing.T) {
	got, err := invoke.ParseParams([]byte("{\n  \"a\": [1, 2.5, \"\\ud83d\\ude00\"],\n  \"b\": {\"c\": null}\n}\n"))
	require.NoError(t, err)
	assert.Equal(t, `{"a":[1,2.5,"\ud83d\ude00"],"b":{"c":null}}`, string(got), "compacted onto one line")

	for name, in := range map[string]string{
		"empty":               ``,
		"not an object":       `[1]`,
		"null":                `null`,
		"two documents":       `{} {}`,
		"duplicate member":    `{"a":1,"a":2}`,
		"nested duplicate":    `{"a":{"b":1,"b":1}}`,
		"invalid UTF-8":       "{\"a\":\"\xff\"}",
		"lone high half":      `{"a":"\ud800"}`,
		"lone low half":       `{"a":"\udc00x"}`,
		"number out of range": `{"a":1e999}`,
		"truncated":           `{"a":`,
		"too deep":            `{"a":` + string(bytes.Repeat([]byte("["), 200)) + string(bytes.Repeat([]byte("]"), 200)) + `}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := invoke.ParseParams([]byte(in))
			assert.ErrorIs(t, err, invoke.ErrInvalidInvocation)
		})
	}
}

func TestParseLimits(t *testing.T) {
	l, err := invoke.ParseLimits([]byte(`{"wall_time_ms": 2500, "max_stderr_bytes": 0}`))
	require.NoError(t, err)
	want := invoke.DefaultLimits()
	want.WallTimeMS, want.MaxStderrBytes = 2500, 0
	assert.Equal(t, want, l, "the members given over the defaults")

	d := invoke.DefaultLimits()
	assert.Equal(t, invoke.Limits{WallTimeMS: 10000, MaxRequestBytes: 1 << 20, MaxStdoutBytes: 1 << 20,
		MaxStderrBytes: 64 << 10, CleanupTimeMS: 1000}, d, "the peer seed's defaults")
	assert.NoError(t, d.Validate())

	for _, r := range invoke.LimitRanges {
		for _, v := range []int64{r.Min, r.Max} {
			l := invoke.DefaultLimits()
			*r.Field(&l) = v
			assert.NoError(t, l.Validate(), "%s = %d is in range", r.Name, v)
		}
		for _, v := range []int64{r.Min - 1, r.Max + 1} {
			l := invoke.DefaultLimits()
			*r.Field(&l) = v
			assert.ErrorIs(t, l.Validate(), invoke.ErrInvalidInvocation, "%s = %d is out of range", r.Name, v)
			b, _ := json.Marshal(map[string]int64{r.Name: v})
			_, err := invoke.ParseLimits(b)
			assert.ErrorIs(t, err, invoke.ErrInvalidInvocation)
		}
	}
	for name, in := range map[string]string{
		"unknown member":   `{"wall_time":5}`,
		"duplicate member": `{"wall_time_ms":5,"wall_time_ms":6}`,
		"not an integer":   `{"wall_time_ms":5.5}`,
		"a string":         `{"wall_time_ms":"5"}`,
		"null":             `{"wall_time_ms":null}`,
		"not an object":    `[]`,
		"trailing":         `{} 1`,
	} {
		_, err := invoke.ParseLimits([]byte(in))
		assert.ErrorIs(t, err, invoke.ErrInvalidInvocation, name)
	}
}

// messages are every message a refusal of ParseParams or ParseLimits may
// carry is built from: none depends on the input.
func assertFixedMessage(t *testing.T, err error, input []byte) {
	var e *invoke.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, invoke.CodeInvalidInvocation, e.Code)
	if len(input) >= 16 {
		assert.NotContains(t, e.Error(), string(input), "the refusal echoes the input")
	}
}

func FuzzParseParams(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":"\ud83d\ude00"}`, `{"a":1,"a":2}`, "{\"a\":\"\xff\"}", `{"a":1e999}`, `[]`, ` {"b":[{"c":null}]} `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := invoke.ParseParams(data)
		if err != nil {
			assertFixedMessage(t, err, data)
			return
		}
		assert.NotContains(t, string(got), "\n", "one line")
		var v map[string]any
		require.NoError(t, json.Unmarshal(got, &v), "an accepted document decodes as an object")
		again, err := invoke.ParseParams(got)
		require.NoError(t, err, "the compacted form is accepted again")
		assert.Equal(t, string(got), string(again))
	})
}

func FuzzParseLimits(f *testing.F) {
	for _, s := range []string{`{}`, `{"wall_time_ms":1}`, `{"max_stderr_bytes":0,"cleanup_time_ms":5000}`, `{"wall_time_ms":600001}`, `{"x":1}`, `{"wall_time_ms":1.5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := invoke.ParseLimits(data)
		if err != nil {
			assertFixedMessage(t, err, data)
			return
		}
		assert.NoError(t, l.Validate(), "accepted limits are in range")
	})
}

// FuzzReadMessage holds the reader of the extension's lines, its most
// exposed parser, to its contract: it never panics, every refusal is
// protocol_invalid, and a line it accepts is one JSON object that
// encoding/json reads too, with no member name twice.
func FuzzReadMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"m","data":{"code":"invalid"}}}`,
		`{"jsonrpc":"2.0","method":"log","params":{"message":"hi"}}`,
		`{"jsonrpc":"2.0","id":"q","method":"kv.get","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"s":"\ud800"}}`,
		`{"jsonrpc":"1.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"x"}`,
		"   ",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ok, code := invoke.ReadMessage(line)
		if code != "" {
			assert.Equal(t, invoke.CodeProtocolInvalid, code)
			return
		}
		if !ok {
			assert.Empty(t, bytes.TrimSpace(line), "only a blank line is skipped")
			return
		}
		var v map[string]any
		require.NoError(t, json.Unmarshal(line, &v), "an accepted line is a JSON object")
		assert.NoError(t, invoke.CheckStrict(line))
		assert.Equal(t, "2.0", v["jsonrpc"])
	})
}
