package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// webhook.handle crosses once per webhook delivery, and on the webhook
// benchmark (host/daemon's BenchmarkWebhookNotes) encoding/json's
// reflection over its params (headers, a base64 body, a time) and result
// (the Event drafts) was the largest part of the package's CPU. Its params
// and result carry the same kind of hand-written codec as operation.call's
// (opcall_json.go, which says the rules): json.Marshal and json.Unmarshal
// stay the reference, and the decoders take a fast path only for the
// plain shape and hand anything else to encoding/json.

var (
	_ JSONAppender = WebhookHandleParams{}
	_ JSONDecoder  = (*WebhookHandleParams)(nil)
	_ JSONAppender = WebhookHandleResult{}
	_ JSONDecoder  = (*WebhookHandleResult)(nil)

	_ CheckedJSONDecoder = (*WebhookHandleResult)(nil)
)

// AppendsStrictJSON declares that AppendJSON's output keeps the
// transport's strict rule and holds no line break (jsonrpc.StrictAppender),
// so the transport sends it unscanned (the scan was about a third of
// encoding a delivery's params): every string is plain ASCII or
// json.Marshal's, which escapes line breaks and replaces invalid UTF-8;
// the body is base64 and the time RFC 3339. The one way json.Marshal's
// output could break the rule, two header names that differ only in
// invalid UTF-8 and so encode alike (a duplicate key), is refused with an
// error instead. TestWebhookHandleParamsKeepsTheStrictPromise and its fuzz
// target (protocol/jsonrpc) hold it to that.
func (WebhookHandleParams) AppendsStrictJSON() {}

// AppendJSON appends p as JSON (JSONAppender).
func (p WebhookHandleParams) AppendJSON(buf []byte) ([]byte, error) {
	start := len(buf)
	buf = slices.Grow(buf, p.encodedSizeHint())
	buf = append(buf, `{"method":`...)
	buf = appendJSONString(buf, p.Method)
	buf = append(buf, `,"path":`...)
	buf = appendJSONString(buf, p.Path)
	buf = append(buf, `,"webhook_path":`...)
	buf = appendJSONString(buf, p.WebhookPath)
	if p.Query != "" {
		buf = append(buf, `,"query":`...)
		buf = appendJSONString(buf, p.Query)
	}
	if len(p.Headers) > 0 {
		buf = append(buf, `,"headers":{`...)
		var few [16]string // a delivery's header names, without an allocation
		keys := few[:0]
		plain := true
		for k := range p.Headers {
			keys = append(keys, k)
			plain = plain && utf8.ValidString(k)
		}
		slices.Sort(keys) // json.Marshal's order
		if !plain {
			if err := distinctEncodings(keys); err != nil {
				return buf[:start], err
			}
		}
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, k)
			buf = append(buf, ':')
			buf = appendStrings(buf, p.Headers[k])
		}
		buf = append(buf, '}')
	}
	if len(p.Body) > 0 {
		buf = append(buf, `,"body":"`...)
		buf = base64.StdEncoding.AppendEncode(buf, p.Body)
		buf = append(buf, '"')
	}
	if !p.ReceivedAt.IsZero() {
		// What MarshalJSON writes, appended in place.
		buf = append(buf, `,"received_at":"`...)
		out, err := p.ReceivedAt.AppendText(buf)
		if err != nil {
			b, err := json.Marshal(p) // encoding/json's verdict and error
			return append(buf[:start], b...), err
		}
		buf = append(out, '"')
	}
	return append(buf, '}'), nil
}

// distinctEncodings refuses header names that json.Marshal writes alike:
// names that differ only in invalid UTF-8, each byte of which it writes
// as U+FFFD. The strict rule refuses the duplicate key that would make.
func distinctEncodings(keys []string) error {
	seen := make(map[string]string, len(keys))
	for _, k := range keys {
		e := string(appendJSONString(nil, k))
		if other, dup := seen[e]; dup {
			return fmt.Errorf("webhook.handle params: header names %q and %q encode as the same JSON string", other, k)
		}
		seen[e] = k
	}
	return nil
}

// encodedSizeHint is about what AppendJSON writes for p when nothing needs
// an escape, so the host's encode (from a nil buffer, once per delivery)
// allocates once rather than doubling its way up to a base64 body.
func (p WebhookHandleParams) encodedSizeHint() int {
	n := 128 + len(p.Method) + len(p.Path) + len(p.WebhookPath) + len(p.Query) + base64.StdEncoding.EncodedLen(len(p.Body))
	for k, vs := range p.Headers {
		n += len(k) + 6
		for _, v := range vs {
			n += len(v) + 3
		}
	}
	return n
}

// appendStrings appends a []string as json.Marshal does (nil as null).
func appendStrings(buf []byte, ss []string) []byte {
	if ss == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '[')
	for i, s := range ss {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJSONString(buf, s)
	}
	return append(buf, ']')
}

// DecodeJSON decodes data into p (JSONDecoder).
func (p *WebhookHandleParams) DecodeJSON(data []byte) error {
	// The fast path starts from no headers: encoding/json would add a
	// document's to a map p already holds.
	if p.Headers == nil {
		q := *p
		if decodeWebhookHandleParams(data, &q) {
			*p = q
			return nil
		}
	}
	return json.Unmarshal(data, p)
}

// AppendJSON appends r as JSON (JSONAppender). A payload is copied as it
// is when it is one compact JSON value, which the transport's encoder
// would also have copied unchanged; any other result is encoded by
// encoding/json as the transport would have (no HTML escaping).
func (r WebhookHandleResult) AppendJSON(buf []byte) ([]byte, error) {
	for _, e := range r.Events {
		if len(e.Payload) > 0 && !compactRaw(e.Payload) {
			return appendEncoded(buf, r)
		}
	}
	if len(r.Events) == 0 {
		return append(buf, "{}"...), nil
	}
	start := len(buf)
	buf = append(buf, `{"events":[`...)
	for i, e := range r.Events {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"source":`...)
		buf = appendJSONString(buf, e.Source)
		buf = append(buf, `,"delivery_id":`...)
		buf = appendJSONString(buf, e.DeliveryID)
		if e.ScopeID != "" {
			buf = append(buf, `,"scope_id":`...)
			buf = appendJSONString(buf, e.ScopeID)
		}
		buf = append(buf, `,"family":`...)
		buf = appendJSONString(buf, e.Family)
		if e.Type != "" {
			buf = append(buf, `,"type":`...)
			buf = appendJSONString(buf, e.Type)
		}
		if e.Schema != "" {
			buf = append(buf, `,"schema":`...)
			buf = appendJSONString(buf, e.Schema)
		}
		if len(e.Payload) > 0 {
			buf = append(buf, `,"payload":`...)
			buf = append(buf, e.Payload...)
		}
		if len(e.Works) > 0 {
			buf = append(buf, `,"works":`...)
			buf = appendStrings(buf, e.Works)
		}
		if !e.OccurredAt.IsZero() {
			t, err := e.OccurredAt.MarshalJSON()
			if err != nil {
				return appendEncoded(buf[:start], r) // encoding/json's error
			}
			buf = append(buf, `,"occurred_at":`...)
			buf = append(buf, t...)
		}
		buf = append(buf, '}')
	}
	return append(buf, "]}"...), nil
}

// appendEncoded appends v as the transport's encoder writes it.
func appendEncoded(buf []byte, v any) ([]byte, error) {
	bb := bytes.NewBuffer(buf)
	enc := json.NewEncoder(bb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return buf, err
	}
	out := bb.Bytes()
	return out[:len(out)-1], nil // Encode ends with a newline
}

// compactRaw reports whether b is one valid JSON value with no space
// between its tokens: what encoding/json's compacting leaves as it is
// (without HTML escaping, as the transport encodes).
func compactRaw(b []byte) bool {
	if !validRaw(b) {
		return false
	}
	inString := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// DecodeJSON decodes data into r (JSONDecoder).
func (r *WebhookHandleResult) DecodeJSON(data []byte) error {
	return r.decode(data, false)
}

// DecodeCheckedJSON decodes data the transport checked into r
// (CheckedJSONDecoder): each Event's payload aliases data. The host
// decodes every delivery's answer so, from the call's own copy of it.
func (r *WebhookHandleResult) DecodeCheckedJSON(data []byte) error {
	return r.decode(data, true)
}

func (r *WebhookHandleResult) decode(data []byte, checked bool) error {
	// From no Events only: encoding/json decodes into the elements of a
	// slice r already holds.
	if r.Events == nil {
		q := *r
		if decodeWebhookHandleResult(data, &q, checked) {
			*r = q
			return nil
		}
	}
	return json.Unmarshal(data, r)
}

func decodeWebhookHandleParams(data []byte, p *WebhookHandleParams) bool {
	var seen uint8
	return decodeObject(data, func(d *jsonScan, key []byte) bool {
		switch string(key) {
		case "method":
			return d.once(&seen, 1) && d.stringReusing(&p.Method, httpMethods)
		case "path":
			return d.once(&seen, 2) && d.stringInto(&p.Path)
		case "webhook_path":
			// Most often the request's path itself.
			return d.once(&seen, 4) && d.stringReusing(&p.WebhookPath, []string{p.Path})
		case "query":
			return d.once(&seen, 8) && d.stringInto(&p.Query)
		case "headers":
			return d.once(&seen, 16) && d.headersInto(&p.Headers)
		case "body":
			return d.once(&seen, 32) && d.bytesInto(&p.Body)
		case "received_at":
			return d.once(&seen, 64) && d.timeInto(&p.ReceivedAt)
		}
		return false
	})
}

func decodeWebhookHandleResult(data []byte, r *WebhookHandleResult, checked bool) bool {
	var seen uint8
	d := &jsonScan{b: data, checked: checked}
	more, ok := d.enterDocument()
	if ok && more {
		ok = d.members(func(d *jsonScan, key []byte) bool {
			return string(key) == "events" && d.once(&seen, 1) && d.draftsInto(&r.Events)
		})
	}
	return ok && d.end()
}

// The webhook params decoder runs once per delivery in the package; the
// strings it meets most are these, and a string equal to one of them is
// that string rather than a new copy of its bytes (string(b) == k costs no
// allocation). The values are the same either way.
var (
	httpMethods       = []string{"POST", "GET", "PUT", "PATCH", "DELETE"}
	commonHeaderNames = []string{"Accept", "Accept-Encoding", "Content-Length", "Content-Type", "User-Agent"}
)

// stringReusing is stringInto, with a string equal to one of known set to
// that one.
func (d *jsonScan) stringReusing(field *string, known []string) bool {
	if d.literal("null") {
		return true
	}
	s, ok := d.plainString()
	if ok {
		*field = reuseString(s, known)
	}
	return ok
}

func reuseString(b []byte, known []string) string {
	for _, k := range known {
		if string(b) == k {
			return k
		}
	}
	return string(b)
}

// headersInto reads an object of string arrays into a new map (null sets
// it nil, as encoding/json does); a key twice is left to encoding/json.
// The values of all the headers share one backing array, each slice
// capped at its own length so an append to one never reaches another.
func (d *jsonScan) headersInto(h *map[string][]string) bool {
	if d.literal("null") {
		*h = nil
		return true
	}
	m := map[string][]string{}
	values := make([]string, 0, 8)
	if !d.object(func(d *jsonScan, key []byte) bool {
		if _, dup := m[string(key)]; dup {
			return false
		}
		if d.literal("null") {
			m[reuseString(key, commonHeaderNames)] = nil
			return true
		}
		start := len(values)
		var ok bool
		if values, ok = d.appendStrings(values); !ok {
			return false
		}
		m[reuseString(key, commonHeaderNames)] = values[start:len(values):len(values)]
		return true
	}) {
		return false
	}
	*h = m
	return true
}

// stringsInto reads an array of strings into a new slice (null sets it
// nil; a null element is "", as encoding/json leaves a new string).
func (d *jsonScan) stringsInto(ss *[]string) bool {
	if d.literal("null") {
		*ss = nil
		return true
	}
	out, ok := d.appendStrings([]string{})
	if !ok {
		return false
	}
	*ss = out
	return true
}

// appendStrings reads an array of strings onto dst (a null element is "").
func (d *jsonScan) appendStrings(dst []string) ([]string, bool) {
	ok := d.array(func(d *jsonScan) bool {
		var s string
		if !d.stringInto(&s) {
			return false
		}
		dst = append(dst, s)
		return true
	})
	return dst, ok
}

// array reads an array, handing each element to elem.
func (d *jsonScan) array(elem func(d *jsonScan) bool) bool {
	if d.i >= len(d.b) || d.b[d.i] != '[' {
		return false
	}
	d.i++
	d.space()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return true
	}
	for {
		if !elem(d) {
			return false
		}
		d.space()
		if d.i >= len(d.b) {
			return false
		}
		switch d.b[d.i] {
		case ',':
			d.i++
			d.space()
		case ']':
			d.i++
			return true
		default:
			return false
		}
	}
}

// bytesInto reads a base64 string as encoding/json decodes a []byte
// (standard encoding; null sets it nil). A string base64 refuses is left
// to encoding/json, for its error.
func (d *jsonScan) bytesInto(b *[]byte) bool {
	if d.literal("null") {
		*b = nil
		return true
	}
	s, ok := d.plainString()
	if !ok {
		return false
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(out, s)
	if err != nil {
		return false
	}
	*b = out[:n]
	return true
}

// timeInto reads a time with time.Time's own UnmarshalJSON, which is what
// encoding/json calls; one it refuses is left to encoding/json.
func (d *jsonScan) timeInto(t *time.Time) bool {
	if d.literal("null") {
		return true
	}
	start := d.i
	if _, ok := d.plainString(); !ok {
		return false
	}
	var v time.Time
	if v.UnmarshalJSON(d.b[start:d.i]) != nil {
		return false
	}
	*t = v
	return true
}

// draftsInto reads the Event drafts into a new slice (null sets it nil).
func (d *jsonScan) draftsInto(events *[]EventDraft) bool {
	if d.literal("null") {
		*events = nil
		return true
	}
	out := []EventDraft{}
	if !d.array(func(d *jsonScan) bool {
		var e EventDraft
		if !d.draftInto(&e) {
			return false
		}
		out = append(out, e)
		return true
	}) {
		return false
	}
	*events = out
	return true
}

func (d *jsonScan) draftInto(e *EventDraft) bool {
	if d.literal("null") {
		return true
	}
	var seen uint16
	once := func(bit uint16) bool {
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	}
	return d.object(func(d *jsonScan, key []byte) bool {
		switch string(key) {
		case "source":
			return once(1) && d.stringInto(&e.Source)
		case "delivery_id":
			return once(2) && d.stringInto(&e.DeliveryID)
		case "scope_id":
			return once(4) && d.stringInto(&e.ScopeID)
		case "family":
			return once(8) && d.stringInto(&e.Family)
		case "type":
			return once(16) && d.stringInto(&e.Type)
		case "schema":
			return once(32) && d.stringInto(&e.Schema)
		case "payload":
			return once(64) && d.rawInto(&e.Payload)
		case "works":
			return once(128) && d.stringsInto(&e.Works)
		case "occurred_at":
			return once(256) && d.timeInto(&e.OccurredAt)
		}
		return false
	})
}
