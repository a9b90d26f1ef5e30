package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"unicode/utf8"
)

// The JSON-RPC error numbers this package sends or interprets.
const (
	// CodeParseError answers a line that is not JSON or too long; the
	// connection then closes.
	CodeParseError = -32700
	// CodeInvalidRequest answers JSON that is not a JSON-RPC 2.0 message;
	// the connection then closes.
	CodeInvalidRequest = -32600
	// CodeMethodNotFound answers a method the handler does not serve.
	CodeMethodNotFound = -32601
	// CodeInvalidParams answers params the handler cannot decode.
	CodeInvalidParams = -32602
	// CodeInternal answers an unauthored handler error, with no detail.
	CodeInternal = -32603
	// CodeCancelled answers a request cancelled with $/cancel.
	CodeCancelled = -32800
	// CodeAuthored is the number of authored errors, whose stable code is
	// in data.code; the Conn itself sends it for overloaded.
	CodeAuthored = -32000
)

// maxDepth bounds the nesting of arrays and objects in one message, as
// encoding/json does, so a hostile line cannot exhaust the stack.
const maxDepth = 10000

// wireError is the error object of a JSON-RPC response.
type wireError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// inMessage is one decoded line. Its byte fields alias the line buffer and
// are valid only until the next line is read.
type inMessage struct {
	id        []byte // raw id token; nil when absent
	method    string
	hasMethod bool
	params    []byte // raw params value; nil when absent
	result    []byte // raw result value; nil when absent
	errObj    []byte // raw error object; nil when absent
	// notStrict, when set, says where the line breaks the strict JSON
	// rule outside its id (strict.go); the message is refused unserved.
	notStrict string
}

var (
	errSyntax      = errors.New("invalid JSON")
	errTooDeep     = errors.New("invalid JSON: nesting too deep")
	errNotMessage  = errors.New("not a JSON-RPC 2.0 message")
	errDuplicate   = errors.New("duplicate member in message")
	errBadID       = errors.New("message id is neither a number nor a string")
	errStrictID    = errors.New("message id breaks the strict JSON rule (invalid UTF-8, or a number beyond float64)")
	errBadVersion  = errors.New(`message lacks "jsonrpc": "2.0"`)
	errBadShape    = errors.New("message is neither a request nor a response")
	errMethodValue = errors.New("method is not a string")
)

// parseMessage decodes one line in a single pass: it validates the whole
// line as JSON and slices out the envelope's members without copying them.
// A syntax error is reported as errSyntax (or errTooDeep); a well-formed
// line that is not a JSON-RPC 2.0 message as one of the other errors. The
// same pass checks the strict JSON rule: a break in the id makes the id
// unreadable (errStrictID), one anywhere else is kept in notStrict.
func parseMessage(line []byte) (inMessage, error) {
	var m inMessage
	var strict, idStrict strictNote
	strict.reset()
	idStrict.reset()
	i := skipSpace(line, 0)
	if i == len(line) {
		return m, errSyntax
	}
	if line[i] != '{' {
		end, err := skipValue(line, i, 0, nil)
		if err != nil {
			return m, err
		}
		if skipSpace(line, end) != len(line) {
			return m, errSyntax
		}
		return m, errNotMessage
	}
	// The members are validated as they are sliced out; a shape error is
	// kept until the whole line has proved to be JSON, so invalid JSON is
	// always reported as such.
	var seen uint8
	var version []byte
	var shapeErr error
	i = skipSpace(line, i+1)
	if i < len(line) && line[i] == '}' {
		i++
	} else {
		for {
			if i >= len(line) || line[i] != '"' {
				return m, errSyntax
			}
			keyEnd, err := skipString(line, i, &strict)
			if err != nil {
				return m, err
			}
			key := line[i+1 : keyEnd-1]
			if bytes.IndexByte(key, '\\') >= 0 {
				var s string
				if json.Unmarshal(line[i:keyEnd], &s) == nil {
					key = []byte(s)
				}
			}
			i = skipSpace(line, keyEnd)
			if i >= len(line) || line[i] != ':' {
				return m, errSyntax
			}
			i = skipSpace(line, i+1)
			note := &strict
			if string(key) == "id" {
				note = &idStrict
			}
			valEnd, err := skipValue(line, i, 1, note)
			if err != nil {
				return m, err
			}
			val := line[i:valEnd]
			var bit uint8
			switch string(key) {
			case "jsonrpc":
				bit, version = 1, val
			case "id":
				bit, m.id = 2, val
			case "method":
				bit = 4
				s, ok := decodeString(val)
				if !ok {
					shapeErr = errMethodValue
				}
				m.method, m.hasMethod = s, true
			case "params":
				bit, m.params = 8, val
			case "result":
				bit, m.result = 16, val
			case "error":
				bit, m.errObj = 32, val
			}
			if bit != 0 {
				if seen&bit != 0 {
					shapeErr = errDuplicate
				}
				seen |= bit
			}
			i = skipSpace(line, valEnd)
			if i >= len(line) {
				return m, errSyntax
			}
			if line[i] == '}' {
				i++
				break
			}
			if line[i] != ',' {
				return m, errSyntax
			}
			i = skipSpace(line, i+1)
		}
	}
	if skipSpace(line, i) != len(line) {
		return m, errSyntax
	}
	if shapeErr != nil {
		return m, shapeErr
	}
	if idStrict.broken() {
		m.id = nil // it cannot be echoed
		return m, errStrictID
	}
	if strict.broken() {
		m.notStrict = strict.describe(line)
	}
	if string(version) != `"2.0"` {
		return m, errBadVersion
	}
	if m.id != nil {
		switch m.id[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		case 'n':
			// A null id is allowed only on an error response to a message
			// whose id could not be read.
			if m.hasMethod || m.errObj == nil {
				return m, errBadID
			}
		default:
			return m, errBadID
		}
	}
	switch {
	case m.hasMethod:
		if m.result != nil || m.errObj != nil {
			return m, errBadShape
		}
		if m.params != nil && m.params[0] != '{' && m.params[0] != '[' && string(m.params) != "null" {
			return m, errBadShape
		}
	case m.id != nil:
		if (m.result == nil) == (m.errObj == nil) || m.params != nil {
			return m, errBadShape
		}
		if m.errObj != nil && m.errObj[0] != '{' {
			return m, errBadShape
		}
	default:
		return m, errBadShape
	}
	return m, nil
}

// decodeString returns the Go string of a JSON string token.
func decodeString(tok []byte) (string, bool) {
	if len(tok) < 2 || tok[0] != '"' {
		return "", false
	}
	body := tok[1 : len(tok)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), true
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return "", false
	}
	return s, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue validates the JSON value starting at b[i] (no leading space)
// and returns the index just past it. It accepts exactly what
// encoding/json accepts, but scans string bodies, which dominate large
// messages, with a tight loop rather than a state machine.
//
// With sn set it also notes in sn the first break of the strict JSON rule
// (strict.go), which is no syntax error; nil checks syntax alone.
func skipValue(b []byte, i, depth int, sn *strictNote) (int, error) {
	if i >= len(b) {
		return i, errSyntax
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i, sn)
	case c == '{':
		if depth >= maxDepth {
			return i, errTooDeep
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, errSyntax
			}
			var err error
			if i, err = skipString(b, i, sn); err != nil {
				return i, err
			}
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, errSyntax
			}
			i = skipSpace(b, i+1)
			if i, err = skipValue(b, i, depth+1, sn); err != nil {
				return i, err
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, errSyntax
			}
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
			case '}':
				return i + 1, nil
			default:
				return i, errSyntax
			}
		}
	case c == '[':
		if depth >= maxDepth {
			return i, errTooDeep
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = skipValue(b, i, depth+1, sn); err != nil {
				return i, err
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, errSyntax
			}
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
			case ']':
				return i + 1, nil
			default:
				return i, errSyntax
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i, sn)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	}
	return i, errSyntax
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, errSyntax
	}
	return i + len(lit), nil
}

// skipString validates the string starting at b[i] == '"'. Runs of plain
// ASCII bytes, which make up nearly all of a base64 payload, are skipped
// in one pass (plainRun, with AVX2), else eight at a time. With sn set,
// multi-byte UTF-8 and \u escapes are checked for the strict rule too.
func skipString(b []byte, i int, sn *strictNote) (int, error) {
	i++
	if longStringFastPath {
		// What the loop below finds, a few times faster: the bytes with
		// nothing to check are skipped, and a string that has no other
		// (base64: an artifact chunk) ends at its first quote.
		if n := plainRun(b[i:]); n > 0 {
			i += n
			if i < len(b) && b[i] == '"' {
				return i + 1, nil
			}
		} else if q := bytes.IndexByte(b[i:], '"'); q >= longStringBytes && plainText(b[i:i+q]) {
			return i + q + 1, nil
		}
	}
	for i < len(b) {
		for len(b)-i >= 8 && !hasSpecial(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return i, errSyntax
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 {
					return i, errSyntax
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return i, errSyntax
					}
				}
				if sn != nil && sn.clean() {
					sn.escape(b, i)
				}
				i += 6
			default:
				return i, errSyntax
			}
		case c < 0x20:
			return i, errSyntax
		case c >= utf8.RuneSelf && sn != nil && sn.clean():
			i = sn.text(b, i)
		default:
			i++
		}
	}
	return i, errSyntax
}

// longStringBytes is the length from which skipString looks for a string's
// end with bytes.IndexByte and checks its body in one pass.
const longStringBytes = 256

// longStringFastPath is off only for the differential fuzz target, which
// holds the fast path to the loop it cuts short.
var longStringFastPath = true

// plainText reports whether s holds no backslash, no control character
// and nothing from 0x80: bytes that end a string's plain run.
func plainText(s []byte) bool {
	if bytes.IndexByte(s, '\\') >= 0 {
		return false
	}
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	// A byte below 0x20 borrows in x-0x20 (setting its high bit), one from
	// 0x80 has its own set; without either no byte borrows.
	var acc uint64
	for len(s) >= 32 {
		x0 := binary.LittleEndian.Uint64(s)
		x1 := binary.LittleEndian.Uint64(s[8:])
		x2 := binary.LittleEndian.Uint64(s[16:])
		x3 := binary.LittleEndian.Uint64(s[24:])
		acc |= (x0 - ones*0x20) | x0 | (x1 - ones*0x20) | x1 | (x2 - ones*0x20) | x2 | (x3 - ones*0x20) | x3
		s = s[32:]
	}
	for _, c := range s {
		if c < 0x20 || c >= 0x80 {
			return false
		}
	}
	return acc&highs == 0
}

// hasSpecial reports whether any of the eight bytes in x is a quote, a
// backslash, a control character (below 0x20) or not ASCII (from 0x80).
func hasSpecial(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := x ^ (ones * '"')
	slash := x ^ (ones * '\\')
	return ((quote-ones)&^quote|(slash-ones)&^slash|(x-ones*0x20)&^x|x)&highs != 0
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func skipNumber(b []byte, i int, sn *strictNote) (int, error) {
	start := i
	end, err := scanNumber(b, i)
	if err == nil && sn != nil && sn.clean() {
		sn.number(b, start, end)
	}
	return end, err
}

func scanNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return i, errSyntax
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return i, errSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return i, errSyntax
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return i, errSyntax
		}
	}
	return i, nil
}

// validJSON reports whether b is exactly one JSON value, with optional
// surrounding space.
func validJSON(b []byte) bool {
	i := skipSpace(b, 0)
	end, err := skipValue(b, i, 0, nil)
	return err == nil && skipSpace(b, end) == len(b)
}

// The encoders below append one message, newline included, to buf.

func appendRequestHead(buf []byte, id int64, notification bool, method string) []byte {
	buf = append(buf, `{"jsonrpc":"2.0",`...)
	if !notification {
		buf = append(buf, `"id":`...)
		buf = strconv.AppendInt(buf, id, 10)
		buf = append(buf, ',')
	}
	buf = append(buf, `"method":`...)
	return appendString(buf, method)
}

func appendResponseHead(buf []byte, id []byte) []byte {
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	return append(buf, id...)
}

func appendErrorResponse(buf []byte, id []byte, e *wireError) []byte {
	if id == nil {
		id = []byte("null")
	}
	buf = appendResponseHead(buf, id)
	buf = append(buf, `,"error":{"code":`...)
	buf = strconv.AppendInt(buf, int64(e.Code), 10)
	buf = append(buf, `,"message":`...)
	buf = appendString(buf, e.Message)
	if len(e.Data) > 0 {
		buf = append(buf, `,"data":`...)
		buf = append(buf, e.Data...)
	}
	return append(buf, "}}\n"...)
}

// appendString appends s as a JSON string.
func appendString(buf []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		buf = append(buf, '"')
		buf = append(buf, s...)
		return append(buf, '"')
	}
	b, _ := json.Marshal(s) // a string always marshals
	return append(buf, b...)
}

// Appender is a params or result value that writes its own JSON, for a
// hot path where encoding/json's reflection and copies cost more than the
// message (protocol.ArtifactWriteParams: a chunk's base64). AppendJSON
// appends exactly one JSON value to buf and returns the extended buffer.
// What it appends is held to the strict rule as any value is (one scan,
// no copy), and its line breaks, which in valid JSON are space between
// tokens, become spaces, as a json.RawMessage's do; a StrictAppender's is
// taken as it is.
type Appender interface {
	AppendJSON(buf []byte) ([]byte, error)
}

// StrictAppender is an Appender whose output is strict by construction:
// what AppendJSON appends is one JSON value that keeps the strict rule
// and holds no line break. The Conn takes it as it is, without the scan
// and the line-break pass an Appender's output gets (two passes over a
// chunk's 87 KiB of base64 a message: protocol.ArtifactWriteParams). A
// type that declares it must hold AppendJSON to that in its own tests; a
// broken promise reaches the peer, which refuses the message.
type StrictAppender interface {
	Appender
	// AppendsStrictJSON declares the promise; it is never called.
	AppendsStrictJSON()
}

// RawAppender is an Appender whose output is strict by construction but
// for raw JSON members it copies from elsewhere (user code's
// json.RawMessage: operation.call's input and output). AppendJSONWith
// appends what AppendJSON does, each raw member through appendRaw, which
// checks that member alone against the strict rule, syntax included, and
// turns its line breaks into spaces; an error from appendRaw is returned
// as AppendJSONWith's (the Conn then appends the value as any Appender,
// for the error that gives). The Conn sends the output unscanned: one
// scan of each raw member, where an Appender's output gets the Appender's
// own check of its raw members and then the Conn's scan of the whole. A type
// that declares it must hold the rest of its output to the strict rule
// in its own tests.
type RawAppender interface {
	Appender
	AppendJSONWith(buf []byte, appendRaw func(buf, raw []byte) ([]byte, error)) ([]byte, error)
}

// AppendRaw appends raw, one JSON value, space around it allowed, as the
// Conn appends a json.RawMessage value: checked against the strict rule
// (syntax included) in one scan, its line breaks turned into spaces. It
// is what a RawAppender's appendRaw is.
func AppendRaw(buf, raw []byte) ([]byte, error) {
	if err := checkStrict(raw); err != nil {
		return buf, err
	}
	start := len(buf)
	return spaceLineBreaks(append(buf, raw...), start), nil
}

// alwaysCheckStrict makes appendValue scan every encoded value, as it did
// before encodesStrict; benchmarks set it for the before-and-after ratio.
var alwaysCheckStrict = false

// appendValue appends v as JSON that keeps the strict rule (strict.go),
// which the peer would otherwise refuse. A json.RawMessage is checked and
// copied as it is, with any line break (which valid JSON holds only as
// space between tokens) turned into a space so framing survives; an
// Appender as its doc says (RawAppender, StrictAppender); other
// values are encoded, then checked, since a json.RawMessage inside them is
// copied unchecked by encoding/json.
func appendValue(buf []byte, v any) ([]byte, error) {
	var raw []byte
	switch v := v.(type) {
	case nil:
		return append(buf, "null"...), nil
	case RawAppender:
		if alwaysCheckStrict {
			return appendChecked(buf, v)
		}
		out, err := v.AppendJSONWith(buf, AppendRaw)
		if err != nil {
			// A raw member that is not JSON, or breaks the strict rule:
			// the error is what it was before RawAppender.
			return appendChecked(buf, v)
		}
		return out, nil
	case Appender:
		return appendChecked(buf, v)
	case json.RawMessage:
		raw = v
	case *json.RawMessage:
		if v == nil {
			return append(buf, "null"...), nil
		}
		raw = *v
	default:
		// Encode straight after what buf holds: one copy, no new slice.
		bb := bytes.NewBuffer(buf)
		enc := json.NewEncoder(bb)
		enc.SetEscapeHTML(false)
		start := len(buf)
		if err := enc.Encode(v); err != nil {
			return buf, err
		}
		out := bb.Bytes()
		out = out[:len(out)-1] // Encode ends with a newline
		if encodesStrict(reflect.TypeOf(v)) && !alwaysCheckStrict {
			return out, nil
		}
		if err := checkStrict(out[start:]); err != nil {
			return buf, fmt.Errorf("%T encodes to JSON the peer refuses: %w", v, err)
		}
		return out, nil
	}
	if len(raw) == 0 {
		return append(buf, "null"...), nil
	}
	if err := checkStrict(raw); err != nil {
		return buf, fmt.Errorf("json.RawMessage: %w", err)
	}
	start := len(buf)
	return spaceLineBreaks(append(buf, raw...), start), nil
}

// appendChecked appends an Appender's output held to the strict rule: as
// it is when it declares it strict (StrictAppender), otherwise scanned,
// its line breaks turned into spaces.
func appendChecked(buf []byte, v Appender) ([]byte, error) {
	start := len(buf)
	out, err := v.AppendJSON(buf)
	if err != nil {
		return buf, err
	}
	if _, ok := v.(StrictAppender); ok && !alwaysCheckStrict {
		return out, nil
	}
	if err := checkStrict(out[start:]); err != nil {
		return buf, fmt.Errorf("%T appends JSON the peer refuses: %w", v, err)
	}
	return spaceLineBreaks(out, start), nil
}

// spaceLineBreaks turns the line breaks of the valid JSON in buf[start:]
// into spaces, so framing survives.
func spaceLineBreaks(buf []byte, start int) []byte {
	if bytes.IndexByte(buf[start:], '\n') >= 0 || bytes.IndexByte(buf[start:], '\r') >= 0 {
		for i := start; i < len(buf); i++ {
			if buf[i] == '\n' || buf[i] == '\r' {
				buf[i] = ' '
			}
		}
	}
	return buf
}
