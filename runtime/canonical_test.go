package runtime_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

func envelope(payload string) runtime.Envelope {
	return runtime.Envelope{
		Source: "ingress.sample", DeliveryID: "d-1", ScopeID: "scope-a", Family: "sample",
		Type: "sample.created", Schema: "sample.item.v1", Payload: json.RawMessage(payload),
	}
}

func TestSignatureIgnoresSpelling(t *testing.T) {
	base := `{"a":1,"b":[1.5,"x",true,null],"c":{"d":100,"e":-0}}`
	same := []string{
		` { "c" : { "e" : 0, "d" : 1e2 }, "b" : [ 15e-1, "\u0078", true, null ], "a" : 1.000 } `,
		`{"b":[1.50,"x",true,null],"a":10E-1,"c":{"d":100.0,"e":-0.0e5}}`,
		`{"a":0.1e1,"b":[150e-2,"x",true,null],"c":{"e":0,"d":1E+2}}`,
	}
	want, err := runtime.Signature(envelope(base))
	require.NoError(t, err)
	for _, p := range same {
		got, err := runtime.Signature(envelope(p))
		require.NoError(t, err, p)
		assert.Equal(t, want, got, "same content spelled %s", p)
	}
	// Works are a set and the time a moment.
	e1, e2 := envelope(base), envelope(base)
	e1.Works, e2.Works = []string{"w-2", "w-1"}, []string{"w-1", "w-2", "w-1"}
	e1.OccurredAt = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	e2.OccurredAt = e1.OccurredAt.In(time.FixedZone("X", -5*3600))
	s1, err := runtime.Signature(e1)
	require.NoError(t, err)
	s2, err := runtime.Signature(e2)
	require.NoError(t, err)
	assert.Equal(t, s1, s2)
	// The ID is not content.
	e2.ID = "named"
	s3, err := runtime.Signature(e2)
	require.NoError(t, err)
	assert.Equal(t, s1, s3)
}

func TestSignatureSeesContent(t *testing.T) {
	base := envelope(`{"a":1,"big":12345678901234567890123}`)
	want, err := runtime.Signature(base)
	require.NoError(t, err)
	changes := map[string]func(*runtime.Envelope){
		"payload number":      func(e *runtime.Envelope) { e.Payload = json.RawMessage(`{"a":2,"big":12345678901234567890123}`) },
		"big integer digit":   func(e *runtime.Envelope) { e.Payload = json.RawMessage(`{"a":1,"big":12345678901234567890124}`) },
		"number vs string":    func(e *runtime.Envelope) { e.Payload = json.RawMessage(`{"a":"1","big":12345678901234567890123}`) },
		"absent payload":      func(e *runtime.Envelope) { e.Payload = nil },
		"source":              func(e *runtime.Envelope) { e.Source = "ingress.other" },
		"delivery":            func(e *runtime.Envelope) { e.DeliveryID = "d-2" },
		"scope":               func(e *runtime.Envelope) { e.ScopeID = "scope-b" },
		"family":              func(e *runtime.Envelope) { e.Family = "other" },
		"type":                func(e *runtime.Envelope) { e.Type = "sample.deleted" },
		"schema":              func(e *runtime.Envelope) { e.Schema = "sample.item.v2" },
		"parent":              func(e *runtime.Envelope) { e.Parent = "ev-1" },
		"works":               func(e *runtime.Envelope) { e.Works = []string{"w-1"} },
		"occurred_at":         func(e *runtime.Envelope) { e.OccurredAt = time.Unix(1, 0) },
		"field boundary":      func(e *runtime.Envelope) { e.Family, e.Type = "samplesample", ".created" },
		"nested key order ok": func(e *runtime.Envelope) { e.Payload = json.RawMessage(`{"a":1,"big":12345678901234567890123,"z":{}}`) },
	}
	for name, change := range changes {
		e := base
		change(&e)
		got, err := runtime.Signature(e)
		require.NoError(t, err, name)
		assert.NotEqual(t, want, got, "changing the %s must change the signature", name)
	}
}

func TestSignatureRefusesBadPayloads(t *testing.T) {
	for _, p := range []string{
		`{"a":`, `{} {}`, `{"a":1,"a":2}`, "\"\xff\"", `NaN`, `{"a":1e99999999999}`, `[1,]`,
		strings.Repeat("[", runtime.MaxJSONDepth+2) + strings.Repeat("]", runtime.MaxJSONDepth+2),
	} {
		_, err := runtime.Signature(envelope(p))
		assert.ErrorIs(t, err, runtime.ErrInvalid, "payload %.40q", p)
	}
}

func TestValidateKVBatch(t *testing.T) {
	ok := runtime.KVBatch{
		Preconditions: []runtime.KVPrecondition{{Namespace: "ns", Key: "a", Absent: true}, {Namespace: "ns", Key: "b", Version: "v"}},
		Puts:          []runtime.KVPut{{Namespace: "ns", Key: "a", Value: bytes.Repeat([]byte("x"), runtime.MaxKVValueBytes)}},
		Deletes:       []runtime.KVKey{{Namespace: "ns", Key: "b"}},
	}
	require.NoError(t, runtime.ValidateKVBatch(ok))
	bad := map[string]struct {
		b      runtime.KVBatch
		target error
	}{
		"oversized": {runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "ns", Key: "a",
			Value: make([]byte, runtime.MaxKVValueBytes+1)}}}, runtime.ErrTooLarge},
		"both version and absent": {runtime.KVBatch{Preconditions: []runtime.KVPrecondition{
			{Namespace: "ns", Key: "a", Version: "v", Absent: true}}}, runtime.ErrInvalid},
		"namespace at limit+1": {runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: strings.Repeat("n", runtime.MaxNamespaceBytes+1), Key: "a"}}}, runtime.ErrInvalid},
		"tab in namespace":     {runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "n\ts", Key: "a"}}}, runtime.ErrInvalid},
		"put twice":            {runtime.KVBatch{Puts: []runtime.KVPut{{Namespace: "ns", Key: "a"}, {Namespace: "ns", Key: "a"}}}, runtime.ErrInvalid},
	}
	for name, c := range bad {
		err := runtime.ValidateKVBatch(c.b)
		assert.True(t, errors.Is(err, c.target), "%s: got %v, want %v", name, err, c.target)
	}
	assert.NoError(t, runtime.ValidateNamespace(strings.Repeat("n", runtime.MaxNamespaceBytes)))
	assert.NoError(t, runtime.ValidateKey(strings.Repeat("k", runtime.MaxKeyBytes)))
	assert.NoError(t, runtime.ValidateKey("tabs\tand newlines\n are fine in keys"))
}

func TestKVVersionIsADigestOfTheValue(t *testing.T) {
	assert.Equal(t, runtime.KVVersion([]byte("a")), runtime.KVVersion([]byte("a")))
	assert.NotEqual(t, runtime.KVVersion([]byte("a")), runtime.KVVersion([]byte("b")))
	assert.True(t, strings.HasPrefix(runtime.KVVersion(nil), "sha256:"))
}

// FuzzSignature feeds arbitrary payloads to the canonicaliser: it must never
// panic, and a payload it accepts must keep its signature through a
// decode/encode round trip that changes its spelling.
func FuzzSignature(f *testing.F) {
	for _, seed := range []string{`{"a":1}`, `[1.5e3,-0,"\u00e9",{"b":null}]`, `{"a":1,"a":2}`, `"x"`, `12345678901234567890e-30`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		sig, err := runtime.Signature(envelope(string(payload)))
		if err != nil {
			if !errors.Is(err, runtime.ErrInvalid) {
				t.Fatalf("refusal not ErrInvalid: %v", err)
			}
			return
		}
		if len(payload) == 0 {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("signed a payload encoding/json cannot decode: %v", err)
		}
		respelled, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		again, err := runtime.Signature(envelope(string(respelled)))
		if err != nil {
			t.Fatalf("re-spelled payload refused: %v", err)
		}
		if again != sig {
			t.Fatalf("signature changed when %q was re-spelled as %q", payload, respelled)
		}
	})
}
