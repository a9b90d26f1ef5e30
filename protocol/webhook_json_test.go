package protocol_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

// The hand-written codec of webhook.handle is held to encoding/json as
// operation.call's is (opcall_json_test.go): the same document decodes to
// the same value with the same error, and what AppendJSON writes decodes
// to what json.Marshal's output does, byte for byte with the transport's
// own encoding when the value is plain.

const plainWebhookParams = `{"method":"POST","path":"/notes/team/inbox","webhook_path":"/notes/team/inbox","query":"a=1",` +
	`"headers":{"Content-Length":["61"],"Content-Type":["application/json"],"X-Notes-Signature":["sha256=00ff"]},` +
	`"body":"eyJub3RlcyI6W119","received_at":"2026-12-02T00:31:05.123456789Z"}`

const plainWebhookResult = `{"events":[{"source":"notes/inbox","delivery_id":"n1@1","scope_id":"team","family":"notes.note",` +
	`"type":"note","schema":"notes.note.v3","payload":{"id":"n1","tags":[],"title":"note 1"},"works":["w-1"],"occurred_at":"2026-12-02T00:31:05Z"}]}`

var webhookDocs = []struct {
	name         string
	doc          string
	params, text bool // the params (result) decoder takes its fast path
}{
	{"plain params", plainWebhookParams, true, false},
	{"plain result", plainWebhookResult, false, true},
	{"spaces", " {\n \"method\" : \"GET\" ,\t\"headers\" : { \"A\" : [ \"x\" , \"y\" ] , \"B\" : [ ] } } \r\n", true, false},
	{"empty object", `{}`, true, true},
	{"top-level null", `null`, true, true},
	{"null members", `{"method":null,"path":null,"headers":null,"body":null,"received_at":null}`, true, false},
	{"null header values", `{"headers":{"A":null,"B":[null,"x"]}}`, true, false},
	{"empty body", `{"body":""}`, true, false},
	{"empty headers", `{"headers":{}}`, true, false},
	{"null events", `{"events":null}`, false, true},
	{"empty events", `{"events":[]}`, false, true},
	{"null event", `{"events":[null,{}]}`, false, true},
	{"null draft members", `{"events":[{"source":null,"payload":null,"works":null,"occurred_at":null}]}`, false, true},
	{"utf-8 strings", `{"method":"PÖST€😀","headers":{"É":["ü"]}}`, true, false},
	{"utf-8 draft", `{"events":[{"source":"é","works":["€😀"]}]}`, false, true},
	{"raw payload with spaces", `{"events":[{"payload": { "a" : [1, 2] } }]}`, false, true},

	{"escaped string", `{"method":"P\u004fST"}`, false, false},
	{"escaped key", `{"meth\u006fd":"x"}`, false, false},
	{"folded key", `{"Method":"x","Events":[]}`, false, false},
	{"unknown member", `{"method":"x","extra":1,"events":[]}`, false, false},
	{"duplicate member", `{"method":"x","method":"y"}`, false, false},
	{"duplicate header", `{"headers":{"A":["1"],"A":["2"]}}`, false, false},
	{"duplicate draft member", `{"events":[{"source":"a","source":"b"}]}`, false, false},
	{"duplicate events", `{"events":[{"source":"a","type":"t"}],"events":[{"source":"b"}]}`, false, false},
	{"quotes and brackets in a payload", `{"events":[{"payload":{"a":"x\\\"}]y","b":["\\\\",{"c":"}"}]},"source":"s"}]}`, false, true},
	{"bad base64", `{"body":"e$=="}`, false, false},
	{"unpadded base64", `{"body":"eyJ"}`, false, false},
	{"bad time", `{"received_at":"2026-12-02 00:31:05Z"}`, false, false},
	{"time not a string", `{"received_at":5}`, false, false},
	{"hour 24", `{"events":[{"occurred_at":"2026-12-02T24:00:00Z"}]}`, false, false},
	{"wrong header type", `{"headers":{"A":"x"}}`, false, false},
	{"wrong element type", `{"headers":{"A":[1]}}`, false, false},
	{"wrong works type", `{"events":[{"works":"w"}]}`, false, false},
	{"wrong events type", `{"events":{}}`, false, false},
	{"invalid utf-8 string", "{\"method\":\"\xff\"}", false, false},
	{"invalid payload", `{"events":[{"payload":tru}]}`, false, false},
	{"truncated", `{"method":"x"`, false, false},
	{"trailing garbage", `{}x`, false, false},
	{"trailing comma", `{"headers":{"A":["x",]}}`, false, false},
	{"array", `[]`, false, false},
	{"empty", ``, false, false},
}

func TestWebhookDecodeAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range webhookDocs {
		t.Run(c.name, func(t *testing.T) {
			checkWebhookDecode(t, []byte(c.doc))
			params, result := protocol.WebhookFastForTest([]byte(c.doc))
			assert.Equal(t, c.params, params, "params fast path taken")
			assert.Equal(t, c.text, result, "result fast path taken")
		})
	}
}

// checkWebhookDecode decodes doc with both decoders, from a zero value and
// from one already holding values, and requires the same values and
// errors.
func checkWebhookDecode(t *testing.T, doc []byte) {
	t.Helper()
	for _, start := range []protocol.WebhookHandleParams{{}, {Method: "old", Body: []byte("old"),
		Headers: map[string][]string{"Old": {"1"}}, ReceivedAt: time.Unix(5, 0).UTC()}} {
		want, got := start, start
		want.Headers, got.Headers = cloneHeaders(start.Headers), cloneHeaders(start.Headers)
		wantErr := json.Unmarshal(doc, &want)
		gotErr := got.DecodeJSON(doc)
		assert.Equal(t, errText(wantErr), errText(gotErr), "params error for %q", doc)
		assert.Equal(t, want, got, "params for %q", doc)
		// Each header's values are its own: appending to one leaves the
		// others as they were (the decoder shares one backing array).
		decoded := maps.Clone(got.Headers)
		for k, vs := range decoded {
			decoded[k] = slices.Clone(vs) // nil stays nil, empty stays empty
		}
		for k := range got.Headers {
			_ = append(got.Headers[k], "appended")
		}
		assert.Equal(t, decoded, got.Headers, "headers after an append to each, for %q", doc)
	}
	for _, start := range []protocol.WebhookHandleResult{{}, {Events: []protocol.EventDraft{{Source: "old", Works: []string{"w"}}}}} {
		want, got := start, start
		want.Events, got.Events = cloneDrafts(start.Events), cloneDrafts(start.Events)
		wantErr := json.Unmarshal(doc, &want)
		gotErr := got.DecodeJSON(doc)
		assert.Equal(t, errText(wantErr), errText(gotErr), "result error for %q", doc)
		assert.Equal(t, want, got, "result for %q", doc)
		checked := start
		checked.Events = cloneDrafts(start.Events)
		checkedErr := checked.DecodeCheckedJSON(doc) // never panics, whatever doc
		if transportChecked(doc) {
			assert.Equal(t, errText(wantErr), errText(checkedErr), "checked result error for %q", doc)
			assert.Equal(t, want, checked, "checked result for %q", doc)
		}
	}
}

// DecodeCheckedJSON takes the plain answer's fast path, and its payloads
// alias the checked data, capped, so an append to one cannot write over
// what follows it.
func TestWebhookResultCheckedDecodeAliases(t *testing.T) {
	doc := []byte(`{"events":[{"source":"notes/inbox","delivery_id":"n1@1","family":"notes.note","payload":{"id":"n1","title":"a \"}]"},"type":"note"}]}`)
	assert.True(t, protocol.WebhookResultCheckedFastForTest(doc), "the checked fast path")
	var r protocol.WebhookHandleResult
	require.NoError(t, r.DecodeCheckedJSON(doc))
	require.Len(t, r.Events, 1)
	payload := r.Events[0].Payload
	assert.Equal(t, `{"id":"n1","title":"a \"}]"}`, string(payload))
	at := bytes.Index(doc, []byte(`{"id"`))
	assert.Same(t, &doc[at], &payload[0], "the payload aliases the data")
	assert.Equal(t, len(payload), cap(payload), "capped")
	_ = append(payload, 'x')
	assert.Equal(t, byte(','), doc[at+len(payload)])
	assert.Equal(t, "note", r.Events[0].Type)
}

func cloneHeaders(h map[string][]string) map[string][]string {
	if h == nil {
		return nil
	}
	out := map[string][]string{}
	for k, v := range h {
		out[k] = append([]string(nil), v...)
	}
	return out
}

func cloneDrafts(ds []protocol.EventDraft) []protocol.EventDraft {
	if ds == nil {
		return nil
	}
	out := make([]protocol.EventDraft, len(ds))
	for i, d := range ds {
		out[i] = d
		out[i].Works = append([]string(nil), d.Works...)
	}
	return out
}

func TestWebhookEncodeAgreesWithEncodingJSON(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 31, 5, 123456789, time.UTC)
	params := []protocol.WebhookHandleParams{
		{},
		{Method: "POST", Path: "/notes/team/inbox", WebhookPath: "/notes/team/inbox", Query: "a=1&b=<2>",
			Headers: map[string][]string{"X-B": {"2"}, "X-A": {"1", "é"}, "X-Nil": nil, "X-Empty": {}},
			Body:    []byte(`{"notes":[]}` + "\xff\x00"), ReceivedAt: t0},
		{Method: "P\"O\\S\nT", Headers: map[string][]string{}, Body: []byte{}, ReceivedAt: t0.In(time.FixedZone("X", -5*3600))},
		{Method: "bad utf-8 \xff", ReceivedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, // refused: the year
	}
	for _, p := range params {
		checkWebhookEncode(t, p, &protocol.WebhookHandleParams{}, &protocol.WebhookHandleParams{})
	}
	results := []protocol.WebhookHandleResult{
		{},
		{Events: []protocol.EventDraft{}},
		{Events: []protocol.EventDraft{{Source: "notes/inbox", DeliveryID: "n1@1", ScopeID: "team", Family: "notes.note", Type: "note",
			Schema: "notes.note.v3", Payload: json.RawMessage(`{"id":"n1","title":"a <b> & \"c\"","tags":[]}`), Works: []string{"w-1"}, OccurredAt: t0}}},
		{Events: []protocol.EventDraft{{Source: "s"}, {Source: "t", Payload: json.RawMessage(` { "a" : 1 } `), Works: []string{}}}},
		{Events: []protocol.EventDraft{{Source: "s", Payload: json.RawMessage(`{bad`)}}},                      // refused: the payload
		{Events: []protocol.EventDraft{{Source: "s", OccurredAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}}}, // refused: the year
	}
	for _, r := range results {
		checkWebhookEncode(t, r, &protocol.WebhookHandleResult{}, &protocol.WebhookHandleResult{})
	}
}

// checkWebhookEncode requires AppendJSON of v to refuse what encoding/json
// refuses, to decode (into got) as the transport's own encoding of v
// (encoding/json without HTML escaping) decodes (into want), and to be
// those very bytes for a value without escapes.
func checkWebhookEncode(t *testing.T, v protocol.JSONAppender, got, want any) {
	t.Helper()
	var transport bytes.Buffer
	enc := json.NewEncoder(&transport)
	enc.SetEscapeHTML(false)
	wantErr := enc.Encode(v)
	gotDoc, gotErr := v.AppendJSON(nil)
	require.Equal(t, wantErr == nil, gotErr == nil, "refusal of %#v: %v, encoding/json's %v", v, gotErr, wantErr)
	if wantErr != nil {
		return
	}
	wantDoc := bytes.TrimSuffix(transport.Bytes(), []byte("\n"))
	require.NoError(t, json.Unmarshal(wantDoc, want))
	require.NoError(t, json.Unmarshal(gotDoc, got), "AppendJSON wrote %s", gotDoc)
	assert.Equal(t, want, got, "AppendJSON wrote %s, encoding/json %s", gotDoc, wantDoc)
	if !bytes.Contains(wantDoc, []byte(`\`)) && !bytes.ContainsRune(wantDoc, 0xFFFD) {
		assert.Equal(t, string(wantDoc), string(gotDoc), "the transport's own bytes")
	}
}

// The decoders read what a peer sends: the SDK the host's params, the host
// the extension's result. Whatever the bytes, they agree with
// encoding/json, and what they decode encodes back to a document that
// decodes to the same value.
func FuzzWebhookJSON(f *testing.F) {
	for _, c := range webhookDocs {
		f.Add([]byte(c.doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkWebhookDecode(t, doc)
		var p protocol.WebhookHandleParams
		if p.DecodeJSON(doc) == nil {
			checkWebhookEncode(t, p, &protocol.WebhookHandleParams{}, &protocol.WebhookHandleParams{})
		}
		var r protocol.WebhookHandleResult
		if r.DecodeJSON(doc) == nil {
			checkWebhookEncode(t, r, &protocol.WebhookHandleResult{}, &protocol.WebhookHandleResult{})
		}
	})
}

func BenchmarkWebhookCodec(b *testing.B) {
	params, result := []byte(plainWebhookParams), []byte(plainWebhookResult)
	benchDecode(b, "params/fast", params, (*protocol.WebhookHandleParams).DecodeJSON)
	// The result as the host decodes a delivery's answer: from the call's
	// own copy of it, checked by the transport (DecodeCheckedJSON), and
	// as any data (DecodeJSON).
	benchDecode(b, "result/checked", result, (*protocol.WebhookHandleResult).DecodeCheckedJSON)
	benchDecode(b, "result/fast", result, (*protocol.WebhookHandleResult).DecodeJSON)
	benchDecode(b, "params/encoding-json", params, unmarshal[protocol.WebhookHandleParams])
}
