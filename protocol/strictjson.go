package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxManifestDepth bounds how deeply a manifest's JSON may nest. The deepest
// declaration (an operation's input schema) needs far less; the bound keeps
// a hostile file from costing more than its size.
const MaxManifestDepth = 64

// The strict reader works in two passes. The first walks encoding/json's
// token stream into a tree that keeps what encoding/json forgets (member
// order, duplicate keys, number literals), refusing malformed input with the
// path of the offence. The second walks that tree against the Go type the
// document decodes into, so an unknown field, a null where a value belongs
// or a number out of range is refused with its path before encoding/json,
// which matches keys case-insensitively and keeps the last duplicate, ever
// sees the document.

type strictKind uint8

const (
	strictNull strictKind = iota
	strictBool
	strictNumber
	strictString
	strictArray
	strictObject
)

func (k strictKind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// strictNode is one JSON value of the tree.
type strictNode struct {
	kind  strictKind
	off   int           // the byte offset of the value's first byte
	text  string        // a string's value or a number's literal
	keys  []string      // an object's member names, in order
	elems []*strictNode // an array's elements, or an object's member values
}

// strictPath is a JSON path under construction: each element is a member
// name (string) or an array index (int).
type strictPath []any

func (p strictPath) String() string {
	var b strings.Builder
	for _, e := range p {
		switch e := e.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", e)
		case string:
			if plainKey(e) {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(e)
			} else {
				fmt.Fprintf(&b, "[%s]", strconv.Quote(e))
			}
		}
	}
	return b.String()
}

// plainKey reports whether a member name can be written after a dot in a path.
func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (p strictPath) with(e any) strictPath {
	return append(p[:len(p):len(p)], e)
}

// byteOrderMark is U+FEFF in UTF-8, which some editors put first in a file.
const byteOrderMark = "\xef\xbb\xbf"

// decodeStrict decodes data into v (a pointer to a struct), refusing anything
// a lenient decoder would let through. Every refusal is a *ManifestError
// that says where it is: its JSON path when it has one, and its line and
// column.
func decodeStrict(data []byte, v any) error {
	if len(data) > MaxManifestBytes {
		return tooLarge(data, int64(len(data)))
	}
	if !utf8.Valid(data) {
		at := 0
		for at < len(data) {
			r, n := utf8.DecodeRune(data[at:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			at += n
		}
		return locate(&ManifestError{Rule: RuleJSONUTF8, Message: fmt.Sprintf("invalid UTF-8 at byte %d", at)}, data, at)
	}
	if bytes.HasPrefix(data, []byte(byteOrderMark)) {
		return locate(&ManifestError{Rule: RuleJSONSyntax,
			Message: "the manifest begins with a byte order mark (U+FEFF): save it as UTF-8 without one"}, data, 0)
	}
	root, err := parseStrict(data)
	if err != nil {
		return err
	}
	if at := unpairedSurrogate(data); at >= 0 {
		return locate(&ManifestError{Rule: RuleJSONUTF8,
			Message: fmt.Sprintf("an unpaired surrogate escape at byte %d is not valid UTF-8", at)}, data, at)
	}
	if err := checkShape(root, reflect.TypeOf(v).Elem(), nil); err != nil {
		var me *ManifestError
		if errors.As(err, &me) {
			locate(me, data, me.offset)
		}
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		// The shape check admits only what decodes; this is a backstop.
		return &ManifestError{Rule: RuleJSONType, Message: err.Error()}
	}
	return nil
}

// tooLarge refuses a manifest of size bytes, of which data holds at least
// the first MaxManifestBytes+1; it points at the first byte past the limit.
// unpairedSurrogate returns the offset of the first \u escape in data (valid
// JSON) of half a surrogate pair without its other half, or -1. Decoding
// would quietly turn it into U+FFFD, so it counts as invalid UTF-8.
func unpairedSurrogate(data []byte) int {
	inString := false
	expectLow := -1 // where a high half's low half must be
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			if data[i+1] != 'u' {
				i++
				continue
			}
			r, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 32)
			if err != nil {
				return i
			}
			switch {
			case r >= 0xd800 && r < 0xdc00:
				if expectLow >= 0 {
					return expectLow - 6
				}
				expectLow = i + 6
			case r >= 0xdc00 && r < 0xe000:
				if expectLow != i {
					return i
				}
				expectLow = -1
			default:
				if expectLow >= 0 {
					return expectLow - 6
				}
			}
			i += 5
			continue
		}
		if expectLow >= 0 && i >= expectLow {
			return expectLow - 6
		}
	}
	if expectLow >= 0 {
		return expectLow - 6
	}
	return -1
}

func tooLarge(data []byte, size int64) *ManifestError {
	return locate(&ManifestError{Rule: RuleJSONSize,
		Message: fmt.Sprintf("the manifest is over %d bytes (%d)", MaxManifestBytes, size)}, data, MaxManifestBytes)
}

// locate sets e's line and column to those of the byte offset off in data
// and returns e.
func locate(e *ManifestError, data []byte, off int) *ManifestError {
	off = min(max(off, 0), len(data))
	before := data[:off]
	e.Line = bytes.Count(before, []byte("\n")) + 1
	e.Column = utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	e.offset = off
	return e
}

// LocateManifestErrors gives each refusal in err that has a JSON path but
// no place in the text (Validate's, which reads a decoded manifest) the
// line and column of that path's value in data, the document it was
// decoded from. A path the document does not hold (a member left out)
// stays unplaced. It returns err.
func LocateManifestErrors(data []byte, err error) error {
	errs := ManifestErrors(err)
	if len(errs) == 0 {
		return err
	}
	root, perr := parseStrict(data)
	if perr != nil {
		return err
	}
	offsets := map[string]int{}
	var walk func(n *strictNode, path strictPath)
	walk = func(n *strictNode, path strictPath) {
		offsets[path.String()] = n.off
		for i, e := range n.elems {
			if n.kind == strictObject {
				walk(e, path.with(n.keys[i]))
			} else {
				walk(e, path.with(i))
			}
		}
	}
	walk(root, nil)
	for _, e := range errs {
		if off, ok := offsets[e.Path]; ok && e.Line == 0 && e.Path != "" {
			locate(e, data, off)
		}
	}
	return err
}

// strictParser builds the tree from a token stream.
type strictParser struct {
	data []byte
	dec  *json.Decoder
	path strictPath
}

func parseStrict(data []byte) (*strictNode, error) {
	p := &strictParser{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	p.dec.UseNumber()
	root, err := p.value(1)
	if err != nil {
		return nil, err
	}
	end := p.next()
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, p.at(&ManifestError{Rule: RuleJSONTrailing,
			Message: fmt.Sprintf("data after the manifest's object, at byte %d", end)}, end)
	}
	return root, nil
}

// next is the offset of the next token: past the space, and the ':' or ','
// that separate values, that follow the decoder's position.
func (p *strictParser) next() int {
	i := int(p.dec.InputOffset())
	for i < len(p.data) {
		switch p.data[i] {
		case ' ', '\t', '\n', '\r', ':', ',':
			i++
		default:
			return i
		}
	}
	return i
}

// at locates a refusal at the offset off.
func (p *strictParser) at(e *ManifestError, off int) *ManifestError { return locate(e, p.data, off) }

func (p *strictParser) syntax(err error, start int) *ManifestError {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// The token stream's offsets count from its buffer, not the
		// document; a whole-document scan says exactly where the
		// offending byte is (Offset counts it as read).
		at := start
		var whole *json.SyntaxError
		var v any
		if errors.As(json.Unmarshal(p.data, &v), &whole) {
			at = int(whole.Offset) - 1
		}
		return p.at(&ManifestError{Rule: RuleJSONSyntax, Path: p.path.String(),
			Message: "malformed JSON: " + strings.TrimPrefix(se.Error(), "json: ")}, at)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return p.at(&ManifestError{Rule: RuleJSONSyntax, Path: p.path.String(), Message: "the JSON ends early"}, len(p.data))
	default:
		return p.at(&ManifestError{Rule: RuleJSONSyntax, Path: p.path.String(),
			Message: "malformed JSON: " + strings.TrimPrefix(err.Error(), "json: ")}, start)
	}
}

func (p *strictParser) value(depth int) (*strictNode, error) {
	start := p.next()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.syntax(err, start)
	}
	switch t := tok.(type) {
	case nil:
		return &strictNode{kind: strictNull, off: start}, nil
	case bool:
		n := &strictNode{kind: strictBool, off: start}
		if t {
			n.text = "true"
		}
		return n, nil
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil || f-f != 0 {
			return nil, p.at(&ManifestError{Rule: RuleJSONNumber, Path: p.path.String(),
				Message: fmt.Sprintf("the number %.40s is out of range", string(t))}, start)
		}
		return &strictNode{kind: strictNumber, text: string(t), off: start}, nil
	case string:
		return &strictNode{kind: strictString, text: t, off: start}, nil
	case json.Delim:
		if depth > MaxManifestDepth {
			return nil, p.at(&ManifestError{Rule: RuleJSONDepth, Path: p.path.String(),
				Message: fmt.Sprintf("the JSON nests deeper than %d levels", MaxManifestDepth)}, start)
		}
		var n *strictNode
		switch t {
		case '{':
			n, err = p.object(depth)
		case '[':
			n, err = p.array(depth)
		default:
			return nil, p.at(&ManifestError{Rule: RuleJSONSyntax, Path: p.path.String(), Message: fmt.Sprintf("unexpected %v", tok)}, start)
		}
		if n != nil {
			n.off = start
		}
		return n, err
	}
	return nil, p.at(&ManifestError{Rule: RuleJSONSyntax, Path: p.path.String(), Message: fmt.Sprintf("unexpected %v", tok)}, start)
}

func (p *strictParser) object(depth int) (*strictNode, error) {
	n := &strictNode{kind: strictObject}
	seen := map[string]bool{}
	base := p.path
	defer func() { p.path = base }()
	for p.dec.More() {
		start := p.next()
		tok, err := p.dec.Token()
		if err != nil {
			return nil, p.syntax(err, start)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, p.at(&ManifestError{Rule: RuleJSONSyntax, Path: base.String(), Message: "an object member has no name"}, start)
		}
		p.path = base.with(key)
		if seen[key] {
			return nil, p.at(&ManifestError{Rule: RuleJSONDuplicateKey, Path: p.path.String(),
				Message: fmt.Sprintf("the member %q appears twice", key)}, start)
		}
		seen[key] = true
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.keys = append(n.keys, key)
		n.elems = append(n.elems, v)
		p.path = base // what follows a member is not in it
	}
	p.path = base
	start := p.next()
	if _, err := p.dec.Token(); err != nil {
		return nil, p.syntax(err, start)
	}
	return n, nil
}

func (p *strictParser) array(depth int) (*strictNode, error) {
	n := &strictNode{kind: strictArray}
	base := p.path
	defer func() { p.path = base }()
	for i := 0; p.dec.More(); i++ {
		p.path = base.with(i)
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, v)
	}
	p.path = base
	start := p.next()
	if _, err := p.dec.Token(); err != nil {
		return nil, p.syntax(err, start)
	}
	return n, nil
}

var executorLabelsType = reflect.TypeFor[ExecutorLabels]()

// checkShape checks that n fits Go type t, as encoding/json would decode
// it, but with no leniency: member names match exactly, null stands only
// for pointers, slices, maps and interfaces, and integers are integers.
func checkShape(n *strictNode, t reflect.Type, path strictPath) error {
	wrong := func(want string) error {
		return &ManifestError{Rule: RuleJSONType, Path: path.String(),
			Message: fmt.Sprintf("must be %s, not %s", want, n.kind), offset: n.off}
	}
	switch t.Kind() {
	case reflect.Pointer:
		if n.kind == strictNull {
			return nil
		}
		return checkShape(n, t.Elem(), path)
	case reflect.Interface:
		return nil
	case reflect.Struct:
		if n.kind != strictObject {
			return wrong("an object")
		}
		fields := jsonFields(t)
		for i, key := range n.keys {
			f, ok := fields[key]
			if !ok {
				err := unknownMember(t, key, path.with(key))
				err.offset = n.elems[i].off
				return err
			}
			if err := checkShape(n.elems[i], f, path.with(key)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		if n.kind == strictNull {
			return nil
		}
		if n.kind != strictArray {
			return wrong("an array")
		}
		for i, e := range n.elems {
			if err := checkShape(e, t.Elem(), path.with(i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if n.kind == strictNull {
			return nil
		}
		if n.kind != strictObject {
			return wrong("an object")
		}
		for i, key := range n.keys {
			if err := checkShape(n.elems[i], t.Elem(), path.with(key)); err != nil {
				return err
			}
		}
		return nil
	case reflect.String:
		if n.kind != strictString {
			return wrong("a string")
		}
		return nil
	case reflect.Bool:
		if n.kind != strictBool {
			return wrong("a boolean")
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.kind != strictNumber {
			return wrong("an integer")
		}
		if _, err := strconv.ParseInt(n.text, 10, t.Bits()); err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return &ManifestError{Rule: RuleJSONNumber, Path: path.String(),
					Message: fmt.Sprintf("the integer %.40s is out of range", n.text), offset: n.off}
			}
			return &ManifestError{Rule: RuleJSONType, Path: path.String(),
				Message: fmt.Sprintf("must be an integer, not %.40s", n.text), offset: n.off}
		}
		return nil
	case reflect.Float32, reflect.Float64:
		if n.kind != strictNumber {
			return wrong("a number")
		}
		return nil
	}
	return &ManifestError{Rule: RuleJSONType, Path: path.String(), Message: "cannot be decoded", offset: n.off}
}

// unknownMember is the refusal of a member the type does not declare. The
// format grows only by additive fields, so an unknown one means the manifest
// was written for a newer Open Conduit.
func unknownMember(t reflect.Type, key string, path strictPath) *ManifestError {
	switch {
	case t == executorLabelsType:
		return &ManifestError{Rule: RuleNewerExecutorLabel, Path: path.String(),
			Message: fmt.Sprintf("unknown executor label %q: labels are interrupt, inject, resume, workspace and toolbelt; a newer Open Conduit may know it", key)}
	case key == "storage":
		return &ManifestError{Rule: RuleNewerStorage, Path: path.String(),
			Message: "storage is not declared: every extension has its namespaced KV, and a larger store is an external_stores entry; a newer Open Conduit may know this field"}
	}
	return &ManifestError{Rule: RuleNewerField, Path: path.String(),
		Message: fmt.Sprintf("unknown field %q: the manifest needs a newer Open Conduit", key)}
}

// jsonFields maps a struct type's JSON member names to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// normalizeEmpty sets every empty slice and map held in a struct field to
// nil, so a decoded manifest equals the one its own encoding decodes to
// (omitempty drops an empty list; decoding "[]" would keep it).
func normalizeEmpty(v any) {
	normalizeValue(reflect.ValueOf(v))
}

func normalizeValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			normalizeValue(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if !f.CanSet() {
				continue
			}
			if (f.Kind() == reflect.Slice || f.Kind() == reflect.Map) && !f.IsNil() && f.Len() == 0 {
				f.Set(reflect.Zero(f.Type()))
				continue
			}
			normalizeValue(f)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct || v.Type().Elem().Kind() == reflect.Pointer {
			for i := 0; i < v.Len(); i++ {
				normalizeValue(v.Index(i))
			}
		}
	}
}
