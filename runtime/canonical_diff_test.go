package runtime

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// canonicalSamples are documents of every kind: plain ones the fast path
// takes and the ones it hands to the decoder's path (escapes, duplicates,
// bad syntax, deep nesting, huge exponents).
var canonicalSamples = []string{
	`{"notes":[{"id":"n1","rev":"1","title":"note 1"}]}`,
	`{"id":"b1-0-1","title":"note 1","tags":[]}`,
	` { "c" : { "e" : 0, "d" : 1e2 }, "b" : [ 15e-1, "x", true, null ], "a" : 1.000 } `,
	`{"a":1,"b":[1.5,"x",true,null],"c":{"d":100,"e":-0}}`,
	`[0, -0, 0.0, -0.000e-5, 10, 100, 1e+2, 1E2, 12.500, 0.0012, 12345678901234567890123, 1e999999999, 1e-000000000000005]`,
	`"<&>"`, "\"\u2028 \u2029 \u00e9 \xe2\x82\xac\"", `{"<":1,"&":2,">":3,"a":{"b":{"c":[[[]]]}}}`,
	`{}`, `[]`, `""`, `true`, `false`, `null`, `0`, `-1`, `{"":""}`,
	`{"a":"\u0061"}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `"\ud800"`, `{"\ud800":1,"\udbff":2}`,
	`{"a":`, `{} {}`, `[1,]`, `{"a":1,}`, `NaN`, `01`, `1.`, `.5`, `-`, `1e`, `1e+`, `{"a" 1}`, `{1:2}`, `[1 2]`,
	`{"a":1e99999999999}`, `1e2147483647`, `1e2147483648`, `1e-2147483648`, `1e-2147483649`,
	"\"\xff\"", "\"a\tb\"", "[1]\x00", " \t\r\n1\n", `tru`, `nul`, `[true,false,null]`,
	strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1),
	strings.Repeat("[", MaxJSONDepth+2) + strings.Repeat("]", MaxJSONDepth+2),
	strings.Repeat(`{"a":`, MaxJSONDepth) + "1" + strings.Repeat("}", MaxJSONDepth),
	strings.Repeat(`{"a":`, MaxJSONDepth+1) + "1" + strings.Repeat("}", MaxJSONDepth+1),
}

// checkCanonicalAgrees holds canonicalJSON to the decoder-based reference
// on data: the same bytes, or the same error.
func checkCanonicalAgrees(t *testing.T, data []byte) {
	t.Helper()
	var got, want bytes.Buffer
	gotErr, wantErr := canonicalJSON(&got, data), oldCanonicalJSON(&want, data)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("%q: error %v, the reference's %v", data, gotErr, wantErr)
	}
	if wantErr == nil && got.String() != want.String() {
		t.Fatalf("%q: canonical %q, the reference's %q", data, got.String(), want.String())
	}
}

func TestCanonicalAgreesWithTheDecoderPath(t *testing.T) {
	for _, s := range canonicalSamples {
		checkCanonicalAgrees(t, []byte(s))
	}
}

// The fast path must take the plain documents (or the agreement above
// would hold of the reference against itself) and give up on what only
// the decoder's path may decide.
func TestFastCanonicalTakesPlainDocumentsOnly(t *testing.T) {
	var f fastCanonical
	for _, s := range []string{canonicalSamples[0], canonicalSamples[1], canonicalSamples[2], canonicalSamples[4], `"<&>"`, `{}`, `0`} {
		_, ok := f.appendCanonical(nil, []byte(s))
		assert.True(t, ok, "the fast path takes %s", s)
	}
	for _, s := range []string{`{"a":"\u0061"}`, `{"a":1,"a":2}`, `{} {}`, `[1,]`, `01`, `1e9999999999`, "\"a\tb\"",
		strings.Repeat("[", MaxJSONDepth+2) + strings.Repeat("]", MaxJSONDepth+2)} {
		out, ok := f.appendCanonical([]byte("kept"), []byte(s))
		assert.False(t, ok, "the fast path leaves %s to the decoder", s)
		assert.Equal(t, "kept", string(out), "giving up leaves dst as it was")
	}
}

// FuzzCanonicalAgreesWithTheDecoderPath: for every input the canonical
// form with its fast path answers exactly what the decoder-based one did,
// so the fast path neither accepts what was refused nor changes a
// signature.
func FuzzCanonicalAgreesWithTheDecoderPath(f *testing.F) {
	for _, s := range canonicalSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(checkCanonicalAgrees)
}

// FuzzValidateEnvelopeAgreesWithTheOld holds ValidateEnvelope (one
// canonical pass, pooled scratch) to the old one (two passes) on whole
// envelopes: the same signature or the same error.
func FuzzValidateEnvelopeAgreesWithTheOld(f *testing.F) {
	f.Add("ingress.sample", "d-1", "scope-a", "sample", "", "w-2,w-1,w-2", int64(0), []byte(`{"a":1}`))
	f.Add("s", "d", "", "", "ev-1", "", int64(1764633600123456789), []byte(`[1.50,"x"]`))
	f.Add("s", "", "", "", "", "", int64(0), []byte(`{}`))
	f.Add("s\x01", "d", "", "", "", "", int64(0), []byte(nil))
	f.Add("s", "d", "", "", "", "a,,b", int64(-5), []byte(`{"a":1,"a":2}`))
	f.Fuzz(func(t *testing.T, source, delivery, scope, family, parent, works string, occurred int64, payload []byte) {
		env := Envelope{Source: source, DeliveryID: delivery, ScopeID: scope, Family: family, Type: family + ".t",
			Schema: family + ".v1", Parent: parent, Payload: payload}
		if works != "" {
			env.Works = strings.Split(works, ",")
		}
		if occurred != 0 {
			env.OccurredAt = time.Unix(0, occurred).In(time.FixedZone("X", 3600))
		}
		got, gotErr := ValidateEnvelope(env)
		want, wantErr := oldValidateEnvelope(env)
		require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(gotErr))
		require.Equal(t, want, got)
		gotSig, gotErr := Signature(env)
		wantSig, wantErr := oldSignature(env)
		require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(gotErr))
		require.Equal(t, wantSig, gotSig)
	})
}

func BenchmarkValidateEnvelope(b *testing.B) {
	env := Envelope{Source: "notes/inbox", DeliveryID: "b1-0-1", ScopeID: "team", Family: "notes.note", Type: "note",
		Schema: "notes.note.v3", Payload: []byte(`{"id":"b1-0-1","title":"note 1","tags":[]}`)}
	for _, c := range []struct {
		name string
		fn   func(Envelope) (string, error)
	}{{"new", ValidateEnvelope}, {"old", oldValidateEnvelope}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.fn(env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A payload over the bound is refused as too large, as before, whether or
// not it is valid JSON (the fuzz target never reaches the bound).
func TestValidateEnvelopeRefusesAnOversizedPayloadAsTheOld(t *testing.T) {
	for _, payload := range []string{`"` + strings.Repeat("x", MaxPayloadBytes) + `"`, strings.Repeat("[", MaxPayloadBytes+1)} {
		env := Envelope{Source: "s", DeliveryID: "d", Payload: []byte(payload)}
		_, gotErr := ValidateEnvelope(env)
		_, wantErr := oldValidateEnvelope(env)
		require.ErrorIs(t, gotErr, ErrTooLarge)
		assert.Equal(t, wantErr.Error(), gotErr.Error())
	}
}
