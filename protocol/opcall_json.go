package protocol

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"sync/atomic"
	"unicode/utf8"
)

// operation.call crosses on every toolbelt call, and on a small call
// encoding/json's reflection was the largest part of the CPU both sides
// spent on it (prototypes/transport's fullstack echo: decoding the params
// in the SDK and the result in the host, encoding both). Its params and
// result therefore carry a hand-written codec, AppendJSON and DecodeJSON,
// which the host's wire calls and the SDK's dispatch use for any type that
// has one (JSONAppender, JSONDecoder). Over the wire they go further:
// AppendJSONWith has the transport check the raw member alone, once
// (jsonrpc.RawAppender), and DecodeCheckedJSON takes what the transport
// has checked already (CheckedJSONDecoder).
//
// encoding/json stays the reference: these types define no MarshalJSON or
// UnmarshalJSON, so json.Marshal and json.Unmarshal treat them as before,
// and the codec's tests and fuzz target hold it to them value for value.
// The decoder takes a fast path only for the plain shape a peer writes
// (exact member names, each once, strings without escapes) and hands
// anything else to json.Unmarshal, so its outcome, errors included, is
// always encoding/json's.

// JSONAppender is a wire type with a hand-written JSON encoder.
type JSONAppender interface {
	// AppendJSON appends the value's JSON form to buf; json.Unmarshal of
	// what it appended gives what json.Marshal's output would. Raw JSON
	// members are checked and copied as they are (json.Marshal would
	// compact them), so the output may hold line breaks between tokens;
	// the transport turns those into spaces.
	AppendJSON(buf []byte) ([]byte, error)
}

// JSONDecoder is a wire type with a hand-written JSON decoder.
type JSONDecoder interface {
	// DecodeJSON decodes data into the value as json.Unmarshal would,
	// with the same result and the same error. It does not keep data.
	DecodeJSON(data []byte) error
}

// CheckedJSONDecoder is a JSONDecoder that can take data the transport
// has checked already: one JSON value that keeps its strict rule
// (protocol/jsonrpc validates every line whole, syntax and strict rule,
// before a handler sees a request's params or a call its result).
type CheckedJSONDecoder interface {
	JSONDecoder
	// DecodeCheckedJSON decodes such data as DecodeJSON does, with the
	// same result and error, checking only what the transport leaves
	// open: the shape (an object, strings where strings go), the member
	// names, escapes and duplicates, which the fast path leaves to
	// encoding/json as DecodeJSON's does. It does not check a raw
	// member's syntax again (it finds its end by its quotes and
	// brackets) nor a plain string's UTF-8, and its raw members alias
	// data, capped so an append cannot reach past them: the caller owns
	// data and leaves it unchanged from then on. On data that breaks
	// the precondition it never panics, but a raw member may hold what
	// is not JSON.
	DecodeCheckedJSON(data []byte) error
}

var (
	_ JSONAppender = OperationCallParams{}
	_ JSONAppender = OperationCallResult{}

	_ CheckedJSONDecoder = (*OperationCallParams)(nil)
	_ CheckedJSONDecoder = (*OperationCallResult)(nil)
)

// AppendJSON appends p as JSON (JSONAppender).
func (p OperationCallParams) AppendJSON(buf []byte) ([]byte, error) {
	if len(p.Input) > 0 && !validRaw(p.Input) {
		// encoding/json's verdict and error (it also takes nesting deeper
		// than validRaw follows).
		b, err := json.Marshal(p)
		return append(buf, b...), err
	}
	return p.AppendJSONWith(buf, appendRawAsIs)
}

// appendRawAsIs appends a raw member already found valid.
func appendRawAsIs(buf, raw []byte) ([]byte, error) { return append(buf, raw...), nil }

// appendJSON appends the authority member and closes the params object.
func (a Authority) appendJSON(buf []byte) []byte {
	buf = append(buf, `,"authority":{"scope_id":`...)
	buf = appendJSONString(buf, a.ScopeID)
	for _, m := range [...]struct{ key, value string }{
		{`,"work_id":`, a.WorkID},
		{`,"execution_id":`, a.ExecutionID},
		{`,"binding":`, a.Binding},
		{`,"connection":`, a.Connection},
	} {
		if m.value != "" {
			buf = append(buf, m.key...)
			buf = appendJSONString(buf, m.value)
		}
	}
	return append(buf, "}}"...)
}

// AppendJSONWith appends p as AppendJSON does, its input through
// appendRaw (jsonrpc.RawAppender): the rest is strict by construction (the
// strings are plain ASCII or json.Marshal's, which escapes line breaks and
// replaces invalid UTF-8), so the transport needs to scan the input only.
func (p OperationCallParams) AppendJSONWith(buf []byte, appendRaw func(buf, raw []byte) ([]byte, error)) ([]byte, error) {
	start := len(buf)
	buf = append(buf, `{"operation":`...)
	buf = appendJSONString(buf, p.Operation)
	if p.RequestID != "" {
		buf = append(buf, `,"request_id":`...)
		buf = appendJSONString(buf, p.RequestID)
	}
	if len(p.Input) > 0 {
		buf = append(buf, `,"input":`...)
		var err error
		if buf, err = appendRaw(buf, p.Input); err != nil {
			return buf[:start], err
		}
	}
	return p.Authority.appendJSON(buf), nil
}

// DecodeJSON decodes data into p (JSONDecoder).
func (p *OperationCallParams) DecodeJSON(data []byte) error { return p.decode(data, false) }

// DecodeCheckedJSON decodes data the transport checked into p
// (CheckedJSONDecoder): Input aliases data.
func (p *OperationCallParams) DecodeCheckedJSON(data []byte) error { return p.decode(data, true) }

func (p *OperationCallParams) decode(data []byte, checked bool) error {
	q := *p
	if decodeOperationCallParams(data, &q, checked) {
		*p = q
		return nil
	}
	return unmarshalInto(data, p)
}

// AppendJSON appends r as JSON (JSONAppender).
func (r OperationCallResult) AppendJSON(buf []byte) ([]byte, error) {
	if len(r.Output) == 0 {
		return append(buf, "{}"...), nil
	}
	if !validRaw(r.Output) {
		b, err := json.Marshal(r) // encoding/json's verdict, as above
		return append(buf, b...), err
	}
	return r.AppendJSONWith(buf, appendRawAsIs)
}

// AppendJSONWith appends r as AppendJSON does, its output through
// appendRaw (jsonrpc.RawAppender), which checks what the handler wrote.
func (r OperationCallResult) AppendJSONWith(buf []byte, appendRaw func(buf, raw []byte) ([]byte, error)) ([]byte, error) {
	if len(r.Output) == 0 {
		return append(buf, "{}"...), nil
	}
	start := len(buf)
	buf, err := appendRaw(append(buf, `{"output":`...), r.Output)
	if err != nil {
		return buf[:start], err
	}
	return append(buf, '}'), nil
}

// DecodeJSON decodes data into r (JSONDecoder).
func (r *OperationCallResult) DecodeJSON(data []byte) error { return r.decode(data, false) }

// DecodeCheckedJSON decodes data the transport checked into r
// (CheckedJSONDecoder): Output aliases data.
func (r *OperationCallResult) DecodeCheckedJSON(data []byte) error { return r.decode(data, true) }

func (r *OperationCallResult) decode(data []byte, checked bool) error {
	q := *r
	if decodeOperationCallResult(data, &q, checked) {
		*r = q
		return nil
	}
	return unmarshalInto(data, r)
}

// unmarshalInto is json.Unmarshal(data, v) through a copy of *v on the
// heap, so that v itself does not escape: a caller's value decoded on the
// fast path stays on its stack (encoding/json keeps what it is given
// reachable from the heap).
func unmarshalInto[T any](data []byte, v *T) error {
	w := new(T)
	*w = *v
	err := json.Unmarshal(data, w)
	*v = *w
	return err
}

// The fast decoders report false for anything off the plain shape; the
// caller then decodes with encoding/json. They allocate only what they
// decode (the strings and, unless checked, a copy of the raw member).
// checked says data is checked JSON (CheckedJSONDecoder).

func decodeOperationCallParams(data []byte, p *OperationCallParams, checked bool) bool {
	d := jsonScan{b: data, checked: checked}
	more, ok := d.enterDocument()
	var seen uint8
	for ok && more {
		var key []byte
		if key, ok = d.key(); !ok {
			return false
		}
		var bit uint8
		switch string(key) {
		case "operation":
			bit, ok = 1, d.stringLast(&p.Operation, &lastOperation)
		case "request_id":
			bit, ok = 2, d.stringInto(&p.RequestID)
		case "input":
			bit, ok = 4, d.rawInto(&p.Input)
		case "authority":
			bit, ok = 8, d.authorityInto(&p.Authority)
		default:
			return false
		}
		if !ok || !once(&seen, bit) {
			return false
		}
		more, ok = d.next()
	}
	return ok && d.end()
}

// OperationCallName returns the operation that operation.call params
// name, read from data the transport checked (one JSON value keeping its
// strict rule, CheckedJSONDecoder) without decoding the rest, when the
// params name it plainly: an object whose members are among operation,
// request_id, input and authority, each spelled exactly and present at
// most once, the operation a string without escapes. Then every decoder
// of OperationCallParams reads the same name. Anything else reports
// false, since encoding/json might read another one (it matches member
// names case-insensitively and keeps the last of duplicates). name
// aliases data. It reads every member, skipping the values but the
// operation's, so its cost grows with the params.
func OperationCallName(data []byte) (name []byte, ok bool) {
	d := jsonScan{b: data, checked: true}
	more, ok := d.enterDocument()
	var seen uint8
	for ok && more {
		var key []byte
		if key, ok = d.key(); !ok {
			return nil, false
		}
		var bit uint8
		switch string(key) {
		case "operation":
			bit = 1
			name, ok = d.plainString()
		case "request_id":
			bit, ok = 2, d.skipChecked()
		case "input":
			bit, ok = 4, d.skipChecked()
		case "authority":
			bit, ok = 8, d.skipChecked()
		default:
			return nil, false
		}
		if !ok || !once(&seen, bit) {
			return nil, false
		}
		more, ok = d.next()
	}
	if !ok || seen&1 == 0 || !d.end() {
		return nil, false
	}
	return name, true
}

func decodeOperationCallResult(data []byte, r *OperationCallResult, checked bool) bool {
	d := jsonScan{b: data, checked: checked}
	more, ok := d.enterDocument()
	var seen uint8
	for ok && more {
		var key []byte
		if key, ok = d.key(); !ok || string(key) != "output" || !d.rawInto(&r.Output) || !once(&seen, 1) {
			return false
		}
		more, ok = d.next()
	}
	return ok && d.end()
}

func (d *jsonScan) authorityInto(a *Authority) bool {
	if d.literal("null") {
		return true // encoding/json leaves a struct alone for null
	}
	more, ok := d.enter()
	var seen uint8
	for ok && more {
		var key []byte
		if key, ok = d.key(); !ok {
			return false
		}
		var field *string
		var bit uint8
		switch string(key) {
		case "scope_id":
			field, bit = &a.ScopeID, 1
		case "work_id":
			field, bit = &a.WorkID, 2
		case "execution_id":
			field, bit = &a.ExecutionID, 4
		case "binding":
			field, bit = &a.Binding, 8
		case "connection":
			field, bit = &a.Connection, 16
		default:
			return false
		}
		if bit == 1 {
			ok = d.stringLast(field, &lastScope)
		} else {
			ok = d.stringInto(field)
		}
		if !ok || !once(&seen, bit) {
			return false
		}
		more, ok = d.next()
	}
	return ok
}

// jsonScan reads one JSON document from b.
type jsonScan struct {
	b []byte
	i int
	// checked says b is one JSON value keeping the transport's strict
	// rule (CheckedJSONDecoder): strings and raw members are not checked
	// again, and raw members alias b.
	checked bool
}

// maxFastDepth bounds the nesting the fast path skips through in a raw
// member; deeper documents go to encoding/json, which has its own bound.
const maxFastDepth = 64

// enterDocument starts the document, which must be an object, and reports
// whether it has members. A top-level null (which encoding/json takes as
// no change) reads as an object without members.
func (d *jsonScan) enterDocument() (more, ok bool) {
	d.space()
	if d.literal("null") {
		return false, true
	}
	return d.enter()
}

// end reports whether nothing but space follows.
func (d *jsonScan) end() bool {
	d.space()
	return d.i == len(d.b)
}

func (d *jsonScan) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *jsonScan) literal(lit string) bool {
	if len(d.b)-d.i >= len(lit) && string(d.b[d.i:d.i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// enter reads an object's opening brace, and its closing one when it is
// empty: more says whether members follow.
func (d *jsonScan) enter() (more, ok bool) {
	if d.i >= len(d.b) || d.b[d.i] != '{' {
		return false, false
	}
	d.i++
	d.space()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return false, true
	}
	return true, true
}

// key reads a member name and its colon, up to the value. Only a plain
// name (no escapes) reads: encoding/json would match an escaped or
// differently cased name to a field, which the fast path leaves to it.
func (d *jsonScan) key() ([]byte, bool) {
	key, ok := d.plainString()
	if !ok {
		return nil, false
	}
	d.space()
	if d.i >= len(d.b) || d.b[d.i] != ':' {
		return nil, false
	}
	d.i++
	d.space()
	return key, true
}

// next reads what follows a member's value: a comma (more members) or the
// closing brace.
func (d *jsonScan) next() (more, ok bool) {
	d.space()
	if d.i >= len(d.b) {
		return false, false
	}
	switch d.b[d.i] {
	case ',':
		d.i++
		d.space()
		return true, true
	case '}':
		d.i++
		return false, true
	}
	return false, false
}

// decodeObject reads data as one object, handing each member's key to
// member (which reads the value), and nothing but space after it; a
// top-level null reads as no members. (webhook.handle's codec reads
// through it; operation.call's, the hottest, spells the same loop out
// without the closure.)
func decodeObject(data []byte, member func(d *jsonScan, key []byte) bool) bool {
	d := &jsonScan{b: data}
	more, ok := d.enterDocument()
	if ok && more {
		ok = d.members(member)
	}
	return ok && d.end()
}

// object reads an object, handing each member's key to member.
func (d *jsonScan) object(member func(d *jsonScan, key []byte) bool) bool {
	more, ok := d.enter()
	if ok && more {
		ok = d.members(member)
	}
	return ok
}

// members reads the members of an object entered with members to come,
// up to its closing brace.
func (d *jsonScan) members(member func(d *jsonScan, key []byte) bool) bool {
	for more := true; more; {
		key, ok := d.key()
		if !ok || !member(d, key) {
			return false
		}
		if more, ok = d.next(); !ok {
			return false
		}
	}
	return true
}

// once is the package's once, as a method for the member functions.
func (d *jsonScan) once(seen *uint8, bit uint8) bool { return once(seen, bit) }

// once records a member seen; a second one (which encoding/json resolves
// by order, merging objects) is left to encoding/json.
func once(seen *uint8, bit uint8) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// plainString reads a string without escapes or control characters whose
// bytes are valid UTF-8 (encoding/json would replace invalid bytes with
// U+FFFD) and returns its contents, which alias d.b.
func (d *jsonScan) plainString() ([]byte, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, false
	}
	start := d.i + 1
	if d.checked {
		// Checked JSON has no control character in a string and only
		// valid UTF-8: the string ends at its first quote unless it
		// holds an escape.
		j := quoteOrEscape(d.b, start)
		if j >= len(d.b) || d.b[j] != '"' {
			return nil, false
		}
		d.i = j + 1
		return d.b[start:j], true
	}
	ascii := true
	for j := start; j < len(d.b); j++ {
		c := d.b[j]
		switch {
		case c == '"':
			s := d.b[start:j]
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			d.i = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// Most operation.calls a process serves name the operation and scope of
// the one before; a decoder that meets those bytes again sets the field
// to that string rather than to a new copy (the value is the same).
var lastOperation, lastScope atomic.Pointer[string]

// stringLast is stringInto, reusing the string last holds when equal, and
// keeping a new one there otherwise.
func (d *jsonScan) stringLast(field *string, last *atomic.Pointer[string]) bool {
	if d.literal("null") {
		return true
	}
	b, ok := d.plainString()
	if !ok {
		return false
	}
	if p := last.Load(); p != nil && *p == string(b) {
		*field = *p
		return true
	}
	v := string(b)
	last.Store(&v)
	*field = v
	return true
}

// stringInto reads a string member; null leaves the field as it is, as
// encoding/json does.
func (d *jsonScan) stringInto(field *string) bool {
	if d.literal("null") {
		return true
	}
	s, ok := d.plainString()
	if ok {
		*field = string(s)
	}
	return ok
}

// rawInto reads any value into a raw member, copied (null included, as
// encoding/json's json.RawMessage keeps it); in checked JSON it is found
// by its end alone and aliases d.b.
func (d *jsonScan) rawInto(field *json.RawMessage) bool {
	start := d.i
	if d.checked {
		if !d.skipChecked() {
			return false
		}
		*field = json.RawMessage(d.b[start:d.i:d.i])
		return true
	}
	if !d.skipValue(0) {
		return false
	}
	*field = append(json.RawMessage(nil), d.b[start:d.i]...)
	return true
}

// skipChecked reads one value of checked JSON, finding its end only: a
// string's closing quote, the bracket that closes an object or array
// (nesting needs no bound: nothing recurses), the delimiter after a
// number or literal. It reports false where valid JSON could not end.
func (d *jsonScan) skipChecked() bool {
	b, i := d.b, d.i
	if i >= len(b) {
		return false
	}
	switch b[i] {
	case '"':
		var ok bool
		d.i, ok = checkedStringEnd(b, i+1)
		return ok
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				var ok bool
				if i, ok = checkedStringEnd(b, i+1); !ok {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					d.i = i + 1
					return true
				}
			}
			i++
		}
		return false
	}
	start := i
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			d.i = i
			return i > start
		}
		i++
	}
	d.i = i
	return i > start
}

// checkedStringEnd returns the index past the quote that closes the string
// whose contents start at b[i], in checked JSON: the first quote that is
// not part of an escape.
func checkedStringEnd(b []byte, i int) (int, bool) {
	for {
		i = quoteOrEscape(b, i)
		if i >= len(b) {
			return i, false
		}
		if b[i] == '"' {
			return i + 1, true
		}
		i += 2 // an escape: the backslash and the byte it escapes
	}
}

// quoteOrEscape returns the index of the first quote or backslash in b
// from i, or len(b), looking at eight bytes at a time (member names and
// most strings are too short for bytes.IndexByte to pay for its call).
func quoteOrEscape(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(b)-i >= 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		quote, slash := x^(ones*'"'), x^(ones*'\\')
		// The lowest byte flagged is the first match (a borrow only
		// flags bytes above a true one).
		if m := ((quote-ones)&^quote | (slash-ones)&^slash) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' {
			return i
		}
	}
	return i
}

// validRaw reports whether b is one JSON value, space around it allowed,
// as encoding/json requires of a json.RawMessage it marshals.
func validRaw(b []byte) bool {
	d := &jsonScan{b: b}
	d.space()
	if !d.skipValue(0) {
		return false
	}
	d.space()
	return d.i == len(b)
}

// skipValue reads one JSON value, checking its syntax as encoding/json
// does (which takes any bytes from 0x20 in a string, valid UTF-8 or not).
func (d *jsonScan) skipValue(depth int) bool {
	if d.i >= len(d.b) {
		return false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		if depth >= maxFastDepth {
			return false
		}
		d.i++
		d.space()
		if d.i < len(d.b) && d.b[d.i] == '}' {
			d.i++
			return true
		}
		for {
			if !d.skipString() {
				return false
			}
			d.space()
			if d.i >= len(d.b) || d.b[d.i] != ':' {
				return false
			}
			d.i++
			d.space()
			if !d.skipValue(depth + 1) {
				return false
			}
			d.space()
			if d.i >= len(d.b) {
				return false
			}
			if d.b[d.i] == '}' {
				d.i++
				return true
			}
			if d.b[d.i] != ',' {
				return false
			}
			d.i++
			d.space()
		}
	case c == '[':
		if depth >= maxFastDepth {
			return false
		}
		d.i++
		d.space()
		if d.i < len(d.b) && d.b[d.i] == ']' {
			d.i++
			return true
		}
		for {
			if !d.skipValue(depth + 1) {
				return false
			}
			d.space()
			if d.i >= len(d.b) {
				return false
			}
			if d.b[d.i] == ']' {
				d.i++
				return true
			}
			if d.b[d.i] != ',' {
				return false
			}
			d.i++
			d.space()
		}
	case c == '"':
		return d.skipString()
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return d.skipNumber()
	}
	return false
}

func (d *jsonScan) skipString() bool {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return false
	}
	for j := d.i + 1; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			j++
			if j >= len(d.b) {
				return false
			}
			switch d.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(d.b) {
					return false
				}
				for _, h := range d.b[j+1 : j+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				j += 4
			default:
				return false
			}
		}
	}
	return false
}

// skipNumber reads -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *jsonScan) skipNumber() bool {
	b, i := d.b, d.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	d.i = i
	return true
}

// appendJSONString appends s as a JSON string: as it is when it needs no
// escape, otherwise as encoding/json writes it (escapes, invalid UTF-8 as
// U+FFFD).
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			b, _ := json.Marshal(s) // a string always marshals
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}
