package protocol_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hand-written codec of operation.call is held to encoding/json: the
// same document decodes to the same value with the same error, and what
// AppendJSON writes decodes to what json.Marshal's output does (byte for
// byte when nothing needs an escape or compacting).

// opcallDocs are the decoder's cases: the plain shape a peer writes (the
// fast path) and everything it hands to encoding/json.
var opcallDocs = []struct {
	name string
	doc  string
	fast bool // the params decoder takes its fast path
}{
	{"plain", `{"operation":"bench.echo","request_id":"r-1","input":{"seq":1,"text":"hi"},"authority":{"scope_id":"s","work_id":"w","execution_id":"e","binding":"b","connection":"c"}}`, true},
	{"spaces", " {\n \"operation\" : \"op\" ,\t\"input\" : [ 1 , -2.5e+3 , true , false , null , \"x\\u00e9\\n\" , { } , [ ] ] } \r\n", true},
	{"empty object", `{}`, true},
	{"top-level null", `null`, true},
	{"null members", `{"operation":null,"request_id":null,"input":null,"authority":null}`, true},
	{"null authority member", `{"authority":{"scope_id":null}}`, true},
	{"utf-8 string", `{"operation":"opé€😀"}`, true},
	{"raw with invalid utf-8", "{\"input\":\"\xff\"}", true},
	{"string input", `{"input":"text"}`, true},
	{"number input", `{"input":0}`, true},
	{"deep input", `{"input":` + nested(20) + `}`, true},
	{"quotes and brackets in input strings", `{"input":{"a":"x\\\"}]y","b":["\\\\",{"c":"\\\\\"{"}],"d":"}"},"operation":"after"}`, true},
	{"number input then more", `{"input":-12.5e3,"operation":"after"}`, true},
	{"literal input then more", `{"input":true ,"operation":"after"}`, true},

	{"escaped string", `{"operation":"a\"b\\c\u00e9"}`, false},
	{"escaped line break", `{"operation":"line\nbreak\u00e9","authority":{"scope_id":"tab\t"}}`, false},
	{"escaped key", `{"oper\u0061tion":"x"}`, false},
	{"folded key", `{"Operation":"x"}`, false},
	{"kelvin key", "{\"\u212aey\":1}", false},
	{"unknown member", `{"operation":"x","extra":{"a":[1,2]}}`, false},
	{"duplicate member", `{"operation":"x","operation":"y"}`, false},
	{"duplicate authority", `{"authority":{"scope_id":"a"},"authority":{"work_id":"b"}}`, false},
	{"duplicate in authority", `{"authority":{"scope_id":"a","scope_id":"b"}}`, false},
	{"invalid utf-8 string", "{\"operation\":\"\xff\"}", false},
	{"wrong type", `{"operation":7}`, false},
	{"wrong authority type", `{"authority":"s"}`, false},
	{"array", `[1]`, false},
	{"string", `"x"`, false},
	{"number", `1`, false},
	{"truncated", `{"operation":"x"`, false},
	{"trailing garbage", `{"operation":"x"}x`, false},
	{"two values", `{} {}`, false},
	{"bad literal", `{"input":tru}`, false},
	{"bad number", `{"input":01}`, false},
	{"bad fraction", `{"input":1.}`, false},
	{"bad exponent", `{"input":1e}`, false},
	{"bad escape", `{"input":"\x"}`, false},
	{"short unicode escape", `{"input":"\u12"}`, false},
	{"control character", "{\"input\":\"a\tb\"}", false},
	{"missing colon", `{"operation" "x"}`, false},
	{"trailing comma", `{"operation":"x",}`, false},
	{"empty", ``, false},
	{"space only", `  `, false},
	{"too deep for the fast path", `{"input":` + nested(100) + `}`, false},
	{"too deep for encoding/json", `{"input":` + nested(20000) + `}`, false},
}

func nested(n int) string {
	b := make([]byte, 0, 2*n+1)
	for range n {
		b = append(b, '[')
	}
	b = append(b, '1')
	for range n {
		b = append(b, ']')
	}
	return string(b)
}

func TestOperationCallDecodeAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range opcallDocs {
		t.Run(c.name, func(t *testing.T) {
			checkOperationCallDecode(t, []byte(c.doc))
			fastParams, _ := protocol.OperationCallFastForTest([]byte(c.doc))
			assert.Equal(t, c.fast, fastParams, "fast path taken")
			if transportChecked([]byte(c.doc)) {
				// Checked data takes it as often, and for deep input too
				// (the end of a raw member is found without recursion).
				checkedParams, _ := protocol.OperationCallCheckedFastForTest([]byte(c.doc))
				assert.Equal(t, c.fast || c.name == "too deep for the fast path", checkedParams, "checked fast path taken")
			}
		})
	}
}

// OperationCallName reads a name only where every decoder reads the same
// one: the table's documents that name an operation plainly, and none of
// the others (folded, escaped or duplicate members, unknown ones, a name
// that is not a plain string).
func TestOperationCallNameAgreesWithTheDecoders(t *testing.T) {
	named := map[string]string{
		"plain":                                "bench.echo",
		"spaces":                               "op",
		"utf-8 string":                         "opé€😀",
		"quotes and brackets in input strings": "after",
		"number input then more":               "after",
		"literal input then more":              "after",
	}
	for _, c := range opcallDocs {
		t.Run(c.name, func(t *testing.T) {
			checkOperationCallName(t, []byte(c.doc))
			if !transportChecked([]byte(c.doc)) {
				return // what the transport never passes on
			}
			name, ok := protocol.OperationCallName([]byte(c.doc))
			want, plain := named[c.name]
			assert.Equal(t, plain, ok, "named plainly")
			assert.Equal(t, want, string(name))
		})
	}
	for _, doc := range []string{
		`{"operation":"p","Operation":"h"}`, `{"Operation":"h","operation":"p"}`, `{"operation":"p","operation":"h"}`,
		`{"operation":"p","input":{"operation":"h"}}`, `{"input":"\"operation\":\"h\"","operation":"p"}`,
		`{"operation":"p\u0068"}`, `{"operation":"p","authority":"s"}`, `{"operation":"p","request_id":7}`,
		`{"operation":"p"} `, `{"operation":"p","input":` + nested(20000) + `}`,
	} {
		checkOperationCallName(t, []byte(doc))
	}
}

// checkOperationCallName requires that when OperationCallName reads a name
// from checked data, each decoder that accepts the data reads that name.
func checkOperationCallName(t *testing.T, doc []byte) {
	t.Helper()
	name, ok := protocol.OperationCallName(doc) // never panics, whatever doc
	if !ok || !transportChecked(doc) {
		return
	}
	var viaJSON, viaChecked protocol.OperationCallParams
	if json.Unmarshal(doc, &viaJSON) == nil {
		assert.Equal(t, string(name), viaJSON.Operation, "encoding/json reads another operation in %q", doc)
	}
	if viaChecked.DecodeCheckedJSON(doc) == nil {
		assert.Equal(t, string(name), viaChecked.Operation, "the checked decoder reads another operation in %q", doc)
	}
	if p, err := protocol.DecodeParams[protocol.OperationCallParams](json.RawMessage(doc)); err == nil {
		assert.Equal(t, string(name), p.Operation, "DecodeParams reads another operation in %q", doc)
	}
}

func TestOperationCallResultDecodeAgreesWithEncodingJSON(t *testing.T) {
	for _, doc := range []string{`{"output":{"seq":1}}`, `{}`, `null`, `{"output":null}`, ` { "output" : [1, "a"] } `,
		`{"output":1,"output":2}`, `{"Output":1}`, `{"output":1,"x":2}`, `{"output":}`, `[]`, ``} {
		checkOperationCallDecode(t, []byte(doc))
	}
	_, fast := protocol.OperationCallFastForTest([]byte(`{"output":{"seq":1,"text":"hello"}}`))
	assert.True(t, fast, "the plain result takes the fast path")
	_, fast = protocol.OperationCallCheckedFastForTest([]byte(`{"output":{"seq":1,"text":"hello \"}"}}`))
	assert.True(t, fast, "the plain result takes the checked fast path")
}

// checkOperationCallDecode decodes doc with both decoders, from a zero
// value and from one already holding values (encoding/json keeps what a
// document does not mention), and requires the same values and errors.
func checkOperationCallDecode(t *testing.T, doc []byte) {
	t.Helper()
	for _, start := range []protocol.OperationCallParams{{}, {Operation: "old", Input: json.RawMessage(`1`), Authority: protocol.Authority{ScopeID: "old", Binding: "old"}}} {
		want, got := start, start
		wantErr := json.Unmarshal(doc, &want)
		gotErr := got.DecodeJSON(doc)
		assert.Equal(t, errText(wantErr), errText(gotErr), "params error for %q", doc)
		assert.Equal(t, want, got, "params for %q", doc)
		checked := start
		checkedErr := checked.DecodeCheckedJSON(doc) // never panics, whatever doc
		if transportChecked(doc) {
			assert.Equal(t, errText(wantErr), errText(checkedErr), "checked params error for %q", doc)
			assert.Equal(t, want, checked, "checked params for %q", doc)
		}
	}
	for _, start := range []protocol.OperationCallResult{{}, {Output: json.RawMessage(`"old"`)}} {
		want, got := start, start
		wantErr := json.Unmarshal(doc, &want)
		gotErr := got.DecodeJSON(doc)
		assert.Equal(t, errText(wantErr), errText(gotErr), "result error for %q", doc)
		assert.Equal(t, want, got, "result for %q", doc)
		checked := start
		checkedErr := checked.DecodeCheckedJSON(doc)
		if transportChecked(doc) {
			assert.Equal(t, errText(wantErr), errText(checkedErr), "checked result error for %q", doc)
			assert.Equal(t, want, checked, "checked result for %q", doc)
		}
	}
}

// transportChecked reports whether doc is what DecodeCheckedJSON takes:
// one JSON value with valid UTF-8, as the transport passes on (its strict
// rule also refuses an unpaired surrogate escape, which the checked
// decoder leaves to encoding/json or copies raw, as DecodeJSON does).
func transportChecked(doc []byte) bool { return json.Valid(doc) && utf8.Valid(doc) }

// DecodeCheckedJSON's raw members alias the checked data, capped, so the
// handler's append to its input cannot write over the params behind it.
func TestOperationCallCheckedDecodeAliases(t *testing.T) {
	doc := []byte(`{"input":{"seq":1},"authority":{"scope_id":"s"},"operation":"op"}`)
	var p protocol.OperationCallParams
	require.NoError(t, p.DecodeCheckedJSON(doc))
	assert.Equal(t, `{"seq":1}`, string(p.Input))
	assert.Same(t, &doc[9], &p.Input[0], "input aliases the params")
	assert.Equal(t, len(p.Input), cap(p.Input), "capped")
	_ = append(p.Input, 'x')
	assert.Equal(t, byte(','), doc[18])
	var r protocol.OperationCallResult
	out := []byte(`{"output":"x"}`)
	require.NoError(t, r.DecodeCheckedJSON(out))
	assert.Same(t, &out[10], &r.Output[0], "output aliases the result")
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestOperationCallEncodeAgreesWithEncodingJSON(t *testing.T) {
	full := protocol.Authority{ScopeID: "s", WorkID: "w", ExecutionID: "e", Binding: "b", Connection: "c"}
	cases := []struct {
		name  string
		p     protocol.OperationCallParams
		bytes bool // json.Marshal writes the very same bytes
	}{
		{"zero", protocol.OperationCallParams{}, true},
		{"plain", protocol.OperationCallParams{Operation: "bench.echo", RequestID: "r-1", Input: json.RawMessage(`{"seq":1,"text":"hi"}`), Authority: full}, true},
		{"only scope", protocol.OperationCallParams{Operation: "op", Authority: protocol.Authority{ScopeID: "s", Binding: "b"}}, true},
		{"escapes", protocol.OperationCallParams{Operation: "a\"b\\c\n\x01é<>&\u2028", RequestID: "\xff", Authority: protocol.Authority{ScopeID: "\t"}}, false},
		{"spaced input", protocol.OperationCallParams{Operation: "op", Input: json.RawMessage(" {\n\"a\" : [1, 2] }\t")}, false},
		{"empty input", protocol.OperationCallParams{Operation: "op", Input: json.RawMessage{}}, true},
		{"null input", protocol.OperationCallParams{Operation: "op", Input: json.RawMessage(`null`)}, true},
		{"deep input", protocol.OperationCallParams{Operation: "op", Input: json.RawMessage(nested(100))}, true},
		{"invalid input", protocol.OperationCallParams{Operation: "op", Input: json.RawMessage(`{"a":}`)}, false},
		{"truncated input", protocol.OperationCallParams{Operation: "op", Input: json.RawMessage(`[1,`)}, false},
		{"two values", protocol.OperationCallParams{Operation: "op", Input: json.RawMessage(`1 2`)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkOperationCallEncode(t, c.p, protocol.OperationCallResult{Output: c.p.Input}, c.bytes)
		})
	}
}

// checkOperationCallEncode compares AppendJSON with json.Marshal for p
// and r: the same error, or outputs that decode to the same value (and
// that are the same bytes when bytes is set). AppendJSON must append:
// what buf held stays.
func checkOperationCallEncode(t *testing.T, p protocol.OperationCallParams, r protocol.OperationCallResult, bytes bool) {
	t.Helper()
	for _, v := range []interface {
		protocol.JSONAppender
	}{p, r} {
		want, wantErr := json.Marshal(v)
		got, gotErr := v.AppendJSON([]byte("prefix"))
		require.Equal(t, errText(wantErr), errText(gotErr), "%T %+v", v, v)
		require.True(t, len(got) >= 6 && string(got[:6]) == "prefix", "AppendJSON kept what buf held")
		got = got[6:]
		if wantErr != nil {
			assert.Empty(t, got, "nothing appended on an error")
			continue
		}
		if bytes {
			assert.Equal(t, string(want), string(got), "%T", v)
		}
		assert.True(t, json.Valid(got), "%T: %s", v, got)
		switch v.(type) {
		case protocol.OperationCallParams:
			var a, b protocol.OperationCallParams
			require.NoError(t, json.Unmarshal(want, &a))
			require.NoError(t, json.Unmarshal(got, &b))
			assert.Equal(t, compactRaw(t, a.Input), compactRaw(t, b.Input))
			a.Input, b.Input = nil, nil
			assert.Equal(t, a, b)
		case protocol.OperationCallResult:
			var a, b protocol.OperationCallResult
			require.NoError(t, json.Unmarshal(want, &a))
			require.NoError(t, json.Unmarshal(got, &b))
			assert.Equal(t, compactRaw(t, a.Output), compactRaw(t, b.Output))
		}
	}
}

// compactRaw is raw without the space between its tokens (json.Marshal
// compacts a json.RawMessage; AppendJSON copies it).
func compactRaw(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if raw == nil {
		return ""
	}
	var out []byte
	out, err := json.Marshal(raw)
	require.NoError(t, err)
	return string(out)
}

// The decoder reads what a peer sends, on both sides: the SDK the host's
// params, the host the extension's result. Whatever the bytes, it must
// agree with encoding/json, and what it decodes must encode back to a
// document that decodes to the same value.
func FuzzOperationCallJSON(f *testing.F) {
	for _, c := range opcallDocs {
		if len(c.doc) < 1000 {
			f.Add([]byte(c.doc))
		}
	}
	f.Add([]byte(`{"output":{"seq":1,"text":"hello"}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkOperationCallDecode(t, doc)
		checkOperationCallName(t, doc)
		var p protocol.OperationCallParams
		var r protocol.OperationCallResult
		if p.DecodeJSON(doc) == nil && r.DecodeJSON(doc) == nil {
			checkOperationCallEncode(t, p, r, false)
		}
		// A document as encoding/json writes it takes the fast path.
		if json.Unmarshal(doc, &p) == nil {
			plain, err := json.Marshal(p)
			require.NoError(t, err)
			if fast, _ := protocol.OperationCallFastForTest(plain); !fast && !needsEscape(p) && depth(plain) <= 64 {
				t.Errorf("the fast path refused encoding/json's own %s", plain)
			}
		}
	})
}

// needsEscape reports whether json.Marshal writes one of p's strings with
// an escape (which the fast path leaves to encoding/json).
func needsEscape(p protocol.OperationCallParams) bool {
	for _, s := range []string{p.Operation, p.RequestID, p.Authority.ScopeID, p.Authority.WorkID, p.Authority.ExecutionID, p.Authority.Binding, p.Authority.Connection} {
		b, _ := json.Marshal(s)
		if string(b) != `"`+s+`"` {
			return true
		}
	}
	return false
}

// depth is how deeply doc's arrays and objects nest.
func depth(doc []byte) int {
	d, most, inString := 0, 0, false
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			d++
			most = max(most, d)
		case c == ']' || c == '}':
			d--
		}
	}
	return most
}

// BenchmarkOperationCallDecode decodes the params of the prototype's echo
// with the hand-written decoder (as it arrives unchecked, and as the
// transport checked it) and with encoding/json, in the same run.
func BenchmarkOperationCallDecode(b *testing.B) {
	doc := []byte(`{"operation":"bench.echo","input":{"seq":12345,"text":"hello, extension \u00e9\"\\\n"},"authority":{"scope_id":"bench"}}`)
	result := []byte(`{"output":{"seq":12345,"text":"hello, extension \u00e9\"\\\n"}}`)
	benchDecode(b, "hand", doc, (*protocol.OperationCallParams).DecodeJSON)
	benchDecode(b, "checked", doc, (*protocol.OperationCallParams).DecodeCheckedJSON)
	benchDecode(b, "result-hand", result, (*protocol.OperationCallResult).DecodeJSON)
	benchDecode(b, "result-checked", result, (*protocol.OperationCallResult).DecodeCheckedJSON)
	benchDecode(b, "encoding-json", doc, unmarshal[protocol.OperationCallParams])
}

// benchDecode runs decode of doc into a zero T as the sub-benchmark name.
// The value lives outside the loop, so passing it to decode costs no
// allocation of its own: the figure is the decoder's.
func benchDecode[T any](b *testing.B, name string, doc []byte, decode func(*T, []byte) error) {
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		var v T
		for b.Loop() {
			v = *new(T)
			if err := decode(&v, doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// unmarshal is json.Unmarshal in benchDecode's shape.
func unmarshal[T any](v *T, doc []byte) error { return json.Unmarshal(doc, v) }

// The checked decoder of the echo's params allocates nothing once it has
// met their operation and scope: the input aliases the params, and the
// two strings are the ones it decoded last time.
func TestOperationCallCheckedDecodeReusesStrings(t *testing.T) {
	doc := []byte(`{"operation":"bench.echo","input":{"seq":1},"authority":{"scope_id":"bench"}}`)
	var p protocol.OperationCallParams
	require.NoError(t, p.DecodeCheckedJSON(doc))
	allocs := testing.AllocsPerRun(100, func() {
		var q protocol.OperationCallParams
		if err := q.DecodeCheckedJSON(doc); err != nil || q.Operation != "bench.echo" || q.Authority.ScopeID != "bench" {
			t.Fatalf("%+v %v", q, err)
		}
	})
	assert.Zero(t, allocs)
	other := []byte(`{"operation":"other","authority":{"scope_id":"s2"}}`)
	require.NoError(t, p.DecodeCheckedJSON(other))
	assert.Equal(t, "other", p.Operation)
	assert.Equal(t, "s2", p.Authority.ScopeID)
}

// The authority reader reports a syntax error after a member itself. The
// whole decoder would still refuse such a document (its own next member
// read fails at the same byte), which is why the decoder tests above
// cannot see this.
func TestOperationCallAuthorityRefusesWhatFollowsAMemberBadly(t *testing.T) {
	for _, doc := range []string{
		`{"scope_id":"a" "work_id":"b"}`,
		`{"scope_id":"a"`,
		`{"scope_id":"a";}`,
	} {
		_, ok := protocol.AuthorityFastForTest([]byte(doc))
		assert.False(t, ok, doc)
	}
	a, ok := protocol.AuthorityFastForTest([]byte(`{"scope_id":"a","work_id":"b"}`))
	assert.True(t, ok)
	assert.Equal(t, protocol.Authority{ScopeID: "a", WorkID: "b"}, a)
}
