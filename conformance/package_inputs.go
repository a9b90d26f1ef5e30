package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/open-conduit/open-conduit/protocol"
)

// InputsFile is where a package keeps the inputs certification calls it
// with, relative to the package directory.
const InputsFile = "certify/inputs.json"

// MaxInputsBytes bounds the inputs file.
const MaxInputsBytes = 1 << 20

// maxInputsDepth bounds how deeply the inputs file may nest.
const maxInputsDepth = 64

// Inputs are the inputs an author gives certification in InputsFile, so
// the checks call the package with inputs it accepts instead of inputs
// built from its schemas. Each list holds one or more entries; a check
// tries each.
//
//	{
//	  "operations": {"<operation>": [<input>, ...]},
//	  "routes":     {"<handler>":   [{"family": "...", "type": "...", "schema": "...", "payload": <value>}, ...]},
//	  "ingress":    {"<type>":      [{"path": "...", "headers": {"<name>": ["..."]}, "body": <value>}, ...]},
//	  "kv_layouts": [{"stored": <n>, "seed": [<entry>, ...], "want": [<entry>, ...]}, ...],
//	  "executors":  {"<executor>":  {"quick": <config>, "short": <config>, "long": <config>}}
//	}
//
// Every member is optional. An operation is a declared handler, wait or
// emit operation and its inputs are any JSON values; a route is a
// declared route handler and each entry is an Event of a declared family
// (schema absent or current) that certification offers to route.match;
// an ingress key is a declared extension type with ingress, and each entry
// is a delivery pushed to every source that type registers, its body the
// JSON encoding of body. A kv_layouts entry is an older KV layout of the
// package (KVLayoutSeed), for kv/migration. An executors key is a declared
// executor without a command field, and its value the configs its runs
// take (InputExecutor).
type Inputs struct {
	Operations map[string][]json.RawMessage
	Routes     map[string][]InputEvent
	Ingress    map[string][]InputDelivery
	KVLayouts  []KVLayoutSeed
	Executors  map[string]InputExecutor
}

// InputEvent is an Event an author gives for a route handler.
type InputEvent struct {
	Family  string
	Type    string
	Schema  string
	Payload json.RawMessage
}

// InputDelivery is a delivery an author gives for an ingress type.
type InputDelivery struct {
	Path    string
	Headers map[string][]string
	Body    json.RawMessage
}

// InputSource is a PackageDriver that has the author's inputs. A driver
// without it, or with nil Inputs, has inputs built from the schemas.
type InputSource interface {
	Inputs() *Inputs
}

// InputsError is a refusal of an inputs file: where (a JSON path such as
// $.operations["notes.add"][0], or a byte offset from 0 for a syntax
// error) and why.
type InputsError struct {
	Path    string
	Message string
}

func (e *InputsError) Error() string {
	return fmt.Sprintf("%s: at %s: %s", InputsFile, e.Path, e.Message)
}

// LoadInputs reads InputsFile in dir and checks it against m; a package
// without one has nil Inputs and no error.
func LoadInputs(dir string, m *protocol.Manifest) (*Inputs, error) {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(InputsFile)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", InputsFile, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxInputsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", InputsFile, err)
	}
	return ParseInputs(data, m)
}

// ParseInputs parses an inputs file strictly (valid UTF-8, no duplicate
// member, no unknown field, no trailing data, numbers within float64) and
// checks that it names only what m declares.
func ParseInputs(data []byte, m *protocol.Manifest) (*Inputs, error) {
	if len(data) > MaxInputsBytes {
		return nil, &InputsError{Path: "$", Message: fmt.Sprintf("the file is larger than %d bytes", MaxInputsBytes)}
	}
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, size := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			off += size
		}
		return nil, &InputsError{Path: fmt.Sprintf("byte %d", off), Message: "invalid UTF-8"}
	}
	root, err := parseTree(data)
	if err != nil {
		return nil, err
	}
	in := &Inputs{}
	err = root.object("$", map[string]func(string, *jnode) error{
		"operations": func(p string, n *jnode) error {
			return n.lists(p, func(p, name string, items []*jnode) error {
				if !declaresOperation(m, name) {
					return &InputsError{Path: p, Message: fmt.Sprintf("%q is not an operation the manifest declares", name)}
				}
				for _, it := range items {
					in.add(&in.Operations, name, it.raw())
				}
				return nil
			})
		},
		"routes": func(p string, n *jnode) error {
			return n.lists(p, func(p, name string, items []*jnode) error {
				if !slices.ContainsFunc(m.Provides.Routes, func(r protocol.RouteDecl) bool { return r.Handler == name }) {
					return &InputsError{Path: p, Message: fmt.Sprintf("%q is not a route handler the manifest declares", name)}
				}
				for i, it := range items {
					e, err := parseInputEvent(fmt.Sprintf("%s[%d]", p, i), it, m)
					if err != nil {
						return err
					}
					if in.Routes == nil {
						in.Routes = map[string][]InputEvent{}
					}
					in.Routes[name] = append(in.Routes[name], e)
				}
				return nil
			})
		},
		"executors": func(p string, n *jnode) error {
			x, err := parseInputExecutors(p, n, m)
			in.Executors = x
			return err
		},
		"kv_layouts": func(p string, n *jnode) error {
			seeds, err := parseKVLayouts(p, n, m)
			in.KVLayouts = seeds
			return err
		},
		"ingress": func(p string, n *jnode) error {
			return n.lists(p, func(p, name string, items []*jnode) error {
				if !slices.ContainsFunc(m.Provides.Extensions, func(e protocol.ExtensionDecl) bool { return e.Type == name && e.Ingress }) {
					return &InputsError{Path: p, Message: fmt.Sprintf("%q is not an extension type with ingress the manifest declares", name)}
				}
				for i, it := range items {
					d, err := parseInputDelivery(fmt.Sprintf("%s[%d]", p, i), it)
					if err != nil {
						return err
					}
					if in.Ingress == nil {
						in.Ingress = map[string][]InputDelivery{}
					}
					in.Ingress[name] = append(in.Ingress[name], d)
				}
				return nil
			})
		},
	}, nil)
	if err != nil {
		return nil, err
	}
	return in, nil
}

func (in *Inputs) add(m *map[string][]json.RawMessage, name string, raw json.RawMessage) {
	if *m == nil {
		*m = map[string][]json.RawMessage{}
	}
	(*m)[name] = append((*m)[name], raw)
}

func declaresOperation(m *protocol.Manifest, name string) bool {
	return slices.ContainsFunc(m.Provides.Operations, func(o protocol.OperationDecl) bool { return o.Name == name })
}

func parseInputEvent(p string, n *jnode, m *protocol.Manifest) (InputEvent, error) {
	var e InputEvent
	err := n.object(p, map[string]func(string, *jnode) error{
		"family":  func(p string, n *jnode) error { return n.str(p, &e.Family) },
		"type":    func(p string, n *jnode) error { return n.str(p, &e.Type) },
		"schema":  func(p string, n *jnode) error { return n.str(p, &e.Schema) },
		"payload": func(p string, n *jnode) error { e.Payload = n.raw(); return nil },
	}, []string{"family", "payload"})
	if err != nil {
		return e, err
	}
	if !slices.Contains(families(m), e.Family) {
		return e, &InputsError{Path: p + ".family", Message: fmt.Sprintf("%q is not a family the manifest declares", e.Family)}
	}
	if err := m.CheckWrite(e.Schema); err != nil {
		return e, &InputsError{Path: p + ".schema", Message: err.Error()}
	}
	return e, nil
}

func parseInputDelivery(p string, n *jnode) (InputDelivery, error) {
	var d InputDelivery
	err := n.object(p, map[string]func(string, *jnode) error{
		"path": func(p string, n *jnode) error { return n.str(p, &d.Path) },
		"headers": func(p string, n *jnode) error {
			if n.kind != '{' {
				return n.want(p, "an object of header names to arrays of strings")
			}
			d.Headers = map[string][]string{}
			for i, k := range n.keys {
				v := n.vals[i]
				q := p + member(k)
				if v.kind != '[' {
					return v.want(q, "an array of strings")
				}
				for j, s := range v.vals {
					var text string
					if err := s.str(fmt.Sprintf("%s[%d]", q, j), &text); err != nil {
						return err
					}
					d.Headers[k] = append(d.Headers[k], text)
				}
			}
			return nil
		},
		"body": func(p string, n *jnode) error { d.Body = n.raw(); return nil },
	}, []string{"body"})
	return d, err
}

// ---- a strict JSON tree ----

// jnode is one JSON value of the inputs file, keeping member order so a
// value is given to the package as the author wrote it.
type jnode struct {
	kind byte // '{', '[', '"', 'n' (number), 'b' (true/false), '0' (null)
	text string
	keys []string
	vals []*jnode
}

func parseTree(data []byte) (*jnode, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := parseValue(dec, "$", 0)
	if err != nil {
		return nil, err
	}
	end := int(dec.InputOffset())
	if _, err := dec.Token(); err != io.EOF {
		for end < len(data) && strings.ContainsRune(" \t\r\n", rune(data[end])) {
			end++
		}
		return nil, &InputsError{Path: fmt.Sprintf("byte %d", end), Message: "data after the top-level value"}
	}
	return n, nil
}

func syntaxError(dec *json.Decoder, err error) error {
	return &InputsError{Path: fmt.Sprintf("byte %d", dec.InputOffset()), Message: "invalid JSON: " + err.Error()}
}

func parseValue(dec *json.Decoder, p string, depth int) (*jnode, error) {
	if depth > maxInputsDepth {
		return nil, &InputsError{Path: p, Message: fmt.Sprintf("nested deeper than %d", maxInputsDepth)}
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, syntaxError(dec, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &jnode{kind: '{'}
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, syntaxError(dec, err)
				}
				k, _ := kt.(string)
				if seen[k] {
					return nil, &InputsError{Path: p + member(k), Message: "duplicate member"}
				}
				seen[k] = true
				v, err := parseValue(dec, p+member(k), depth+1)
				if err != nil {
					return nil, err
				}
				n.keys, n.vals = append(n.keys, k), append(n.vals, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, syntaxError(dec, err)
			}
			return n, nil
		case '[':
			n := &jnode{kind: '['}
			for i := 0; dec.More(); i++ {
				v, err := parseValue(dec, fmt.Sprintf("%s[%d]", p, i), depth+1)
				if err != nil {
					return nil, err
				}
				n.vals = append(n.vals, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, syntaxError(dec, err)
			}
			return n, nil
		}
	case string:
		return &jnode{kind: '"', text: t}, nil
	case json.Number:
		if _, err := strconv.ParseFloat(string(t), 64); err != nil {
			return nil, &InputsError{Path: p, Message: fmt.Sprintf("number %s does not fit a float64", t)}
		}
		return &jnode{kind: 'n', text: string(t)}, nil
	case bool:
		return &jnode{kind: 'b', text: strconv.FormatBool(t)}, nil
	case nil:
		return &jnode{kind: '0', text: "null"}, nil
	}
	return nil, &InputsError{Path: p, Message: fmt.Sprintf("unexpected %v", tok)}
}

// member is the path element of an object member.
func member(k string) string {
	plain := k != ""
	for i, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			plain = false
		}
	}
	if plain {
		return "." + k
	}
	q, _ := json.Marshal(k)
	return "[" + string(q) + "]"
}

func (n *jnode) describe() string {
	return map[byte]string{'{': "an object", '[': "an array", '"': "a string", 'n': "a number", 'b': "a boolean", '0': "null"}[n.kind]
}

func (n *jnode) want(p, what string) error {
	return &InputsError{Path: p, Message: fmt.Sprintf("want %s, not %s", what, n.describe())}
}

func (n *jnode) str(p string, out *string) error {
	if n.kind != '"' {
		return n.want(p, "a string")
	}
	*out = n.text
	return nil
}

// object walks an object whose members are fields (each optional unless
// listed in required); any other member is refused.
func (n *jnode) object(p string, fields map[string]func(string, *jnode) error, required []string) error {
	if n.kind != '{' {
		return n.want(p, "an object")
	}
	for i, k := range n.keys {
		f, ok := fields[k]
		if !ok {
			known := make([]string, 0, len(fields))
			for name := range fields {
				known = append(known, name)
			}
			slices.Sort(known)
			return &InputsError{Path: p + member(k), Message: fmt.Sprintf("unknown field (known: %s)", strings.Join(known, ", "))}
		}
		if err := f(p+member(k), n.vals[i]); err != nil {
			return err
		}
	}
	for _, r := range required {
		if !slices.Contains(n.keys, r) {
			return &InputsError{Path: p, Message: fmt.Sprintf("missing field %q", r)}
		}
	}
	return nil
}

// lists walks an object of names to non-empty arrays.
func (n *jnode) lists(p string, each func(p, name string, items []*jnode) error) error {
	if n.kind != '{' {
		return n.want(p, "an object")
	}
	for i, k := range n.keys {
		q := p + member(k)
		v := n.vals[i]
		switch {
		case v.kind != '[':
			return v.want(q, "an array of one or more entries")
		case len(v.vals) == 0:
			return &InputsError{Path: q, Message: "want one or more entries, not none"}
		}
		if err := each(q, k, v.vals); err != nil {
			return err
		}
	}
	return nil
}

// raw is the value as JSON, members in the author's order.
func (n *jnode) raw() json.RawMessage {
	var b bytes.Buffer
	n.write(&b)
	return b.Bytes()
}

func (n *jnode) write(b *bytes.Buffer) {
	switch n.kind {
	case '{':
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			q, _ := json.Marshal(k)
			b.Write(q)
			b.WriteByte(':')
			n.vals[i].write(b)
		}
		b.WriteByte('}')
	case '[':
		b.WriteByte('[')
		for i, v := range n.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			v.write(b)
		}
		b.WriteByte(']')
	case '"':
		q, _ := json.Marshal(n.text)
		b.Write(q)
	default:
		b.WriteString(n.text)
	}
}

// ---- the inputs the checks use ----

// operationInputs are the inputs certification calls an operation with:
// the author's, or one built from its input schema.
func operationInputs(d PackageDriver, o protocol.OperationDecl) []json.RawMessage {
	if in := authorInputs(d); in != nil && len(in.Operations[o.Name]) > 0 {
		return in.Operations[o.Name]
	}
	return []json.RawMessage{SchemaInput(o.Input)}
}

func authorInputs(d PackageDriver) *Inputs {
	if s, ok := d.(InputSource); ok {
		return s.Inputs()
	}
	return nil
}

// SchemaInput builds a value that satisfies a JSON Schema as far as
// certification can tell without the author's help: const, then enum
// (its first value), then default, then the first of oneOf or anyOf, and
// allOf's parts merged; otherwise by type, an object with each required
// property, a string keeping format, pattern and its length bounds, a
// number within minimum/maximum (exclusive too) and a multiple of
// multipleOf, an array of minItems items.
func SchemaInput(schema any) json.RawMessage {
	raw, err := json.Marshal(schema)
	if err != nil || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	var s map[string]any
	if json.Unmarshal(raw, &s) != nil {
		return json.RawMessage(`{}`)
	}
	out, err := json.Marshal(schemaValue(s, "input", 0))
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return out
}

func schemaValue(s map[string]any, name string, depth int) any {
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	if d, ok := s["default"]; ok {
		return d
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 && s["type"] == nil {
			if first, ok := alts[0].(map[string]any); ok && depth <= 8 {
				return schemaValue(first, name, depth+1)
			}
		}
	}
	if all, ok := s["allOf"].([]any); ok && depth <= 8 {
		// One value for every part: their properties and requirements merged.
		merged := map[string]any{}
		props := map[string]any{}
		var req []any
		for k, v := range s {
			if k != "allOf" {
				merged[k] = v
			}
		}
		for _, part := range append([]any{s}, all...) {
			p, _ := part.(map[string]any)
			if pp, ok := p["properties"].(map[string]any); ok {
				for k, v := range pp {
					props[k] = v
				}
			}
			if r, ok := p["required"].([]any); ok {
				req = append(req, r...)
			}
			if t, ok := p["type"]; ok && merged["type"] == nil {
				merged["type"] = t
			}
		}
		merged["properties"], merged["required"] = props, req
		return schemaValue(merged, name, depth+1)
	}
	typ := ""
	switch t := s["type"].(type) {
	case string:
		typ = t
	case []any:
		for _, x := range t {
			if x, ok := x.(string); ok && x != "null" {
				typ = x
				break
			}
		}
	}
	if typ == "" {
		if _, ok := s["properties"]; ok {
			typ = "object"
		}
	}
	if depth > 8 {
		return nil
	}
	switch typ {
	case "object", "":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			rn, ok := r.(string)
			if !ok {
				continue
			}
			ps, _ := props[rn].(map[string]any)
			if ps == nil {
				ps = map[string]any{}
			}
			out[rn] = schemaValue(ps, rn, depth+1)
		}
		return out
	case "string":
		return schemaString(s, name)
	case "integer", "number":
		return schemaNumber(s, typ == "integer")
	case "boolean":
		return true
	case "array":
		n := 0
		if f, ok := s["minItems"].(float64); ok {
			n = int(f)
		}
		items, _ := s["items"].(map[string]any)
		if items == nil {
			items = map[string]any{}
		}
		out := make([]any, 0, n)
		for range min(n, 16) {
			out = append(out, schemaValue(items, name, depth+1))
		}
		return out
	case "null":
		return nil
	}
	return nil
}

// formatSamples are values of the string formats certification knows.
var formatSamples = map[string]string{
	"date-time": "2024-03-01T12:00:00Z",
	"date":      "2024-03-01",
	"time":      "12:00:00Z",
	"duration":  "PT1H",
	"email":     "certify@example.com",
	"hostname":  "example.com",
	"ipv4":      "192.0.2.1",
	"ipv6":      "2001:db8::1",
	"uri":       "https://example.com/certify",
	"url":       "https://example.com/certify",
	"uuid":      "00000000-0000-4000-8000-000000000000",
}

func schemaString(s map[string]any, name string) string {
	if f, ok := s["format"].(string); ok {
		if v, ok := formatSamples[f]; ok {
			return v
		}
	}
	v := "certify " + name
	if p, ok := s["pattern"].(string); ok {
		if m, ok := matchPattern(p); ok {
			v = m
		}
	}
	if f, ok := s["maxLength"].(float64); ok && utf8.RuneCountInString(v) > int(f) {
		v = string([]rune(v)[:max(0, int(f))])
	}
	if f, ok := s["minLength"].(float64); ok {
		for utf8.RuneCountInString(v) < int(f) {
			v += "x"
		}
	}
	return v
}

func schemaNumber(s map[string]any, integer bool) any {
	lo, hasLo := s["minimum"].(float64)
	if x, ok := s["exclusiveMinimum"].(float64); ok {
		lo, hasLo = x+1, true
		if !integer {
			lo = x + 0.5
		}
	}
	hi, hasHi := s["maximum"].(float64)
	if x, ok := s["exclusiveMaximum"].(float64); ok {
		hi, hasHi = x-1, true
		if !integer {
			hi = x - 0.5
		}
	}
	v := 1.0
	if hasLo && v < lo {
		v = lo
	}
	if hasHi && v > hi {
		v = hi
	}
	if m, ok := s["multipleOf"].(float64); ok && m > 0 {
		v = m * float64(int64((v+m-1e-9)/m))
		if hasLo && v < lo {
			v += m
		}
	}
	if integer {
		return int64(v)
	}
	return v
}

// matchPattern builds a string the regular expression matches: the first
// choice of each alternation, the least repetition of each repeat.
func matchPattern(pattern string) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	var b strings.Builder
	if !writeMatch(&b, re.Simplify(), 0) {
		return "", false
	}
	out := b.String()
	if ok, _ := regexp.MatchString(pattern, out); !ok {
		return "", false
	}
	return out, true
}

func writeMatch(b *strings.Builder, re *syntax.Regexp, depth int) bool {
	if depth > 100 || b.Len() > 1024 {
		return false
	}
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			b.WriteRune(r)
		}
	case syntax.OpCharClass:
		if len(re.Rune) < 2 {
			return false
		}
		b.WriteRune(classRune(re.Rune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte('a')
	case syntax.OpCapture:
		return writeMatch(b, re.Sub[0], depth+1)
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if !writeMatch(b, s, depth+1) {
				return false
			}
		}
	case syntax.OpAlternate:
		return writeMatch(b, re.Sub[0], depth+1)
	case syntax.OpPlus:
		return writeMatch(b, re.Sub[0], depth+1)
	case syntax.OpRepeat:
		for range re.Min {
			if !writeMatch(b, re.Sub[0], depth+1) {
				return false
			}
		}
	case syntax.OpStar, syntax.OpQuest, syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine,
		syntax.OpBeginText, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
	default:
		return false
	}
	return true
}

// classRune picks a rune of a character class (pairs of lo, hi): a letter
// or digit when the class has one, else its first printable ASCII rune,
// else its first rune.
func classRune(ranges []rune) rune {
	in := func(r rune) bool {
		for i := 0; i+1 < len(ranges); i += 2 {
			if ranges[i] <= r && r <= ranges[i+1] {
				return true
			}
		}
		return false
	}
	for _, want := range []rune{'a', 'A', '0'} {
		if in(want) {
			return want
		}
	}
	for r := rune(0x21); r < 0x7f; r++ {
		if in(r) {
			return r
		}
	}
	return ranges[0]
}

// describeInput names an input in a failure, cut short.
func describeInput(raw json.RawMessage) string { return clip(string(raw), 120) }
