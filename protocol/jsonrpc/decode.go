package jsonrpc

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"
)

// bigStringBytes is the size from which a string member is decoded
// straight into its field instead of through encoding/json, which scans
// a string three times and costs several nanoseconds a byte: base64
// artifact chunks are the case in point.
const bigStringBytes = 4 << 10

// unmarshal is json.Unmarshal for data this package has already validated
// (params and results). When v points to a struct and data is an object
// with big string members bound to plain []byte or string fields, those
// members are cut out, the rest goes through encoding/json, and the big
// ones are decoded directly (base64 or plain text). Anything unusual takes
// the plain json.Unmarshal path, so the outcome is always what
// encoding/json would give, but for one thing: a big base64 member is
// decoded into the memory its []byte field already holds when that is
// large enough (a reused chunk buffer), where encoding/json allocates.
func unmarshal(data []byte, v any) error {
	if len(data) < bigStringBytes {
		return json.Unmarshal(data, v)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return json.Unmarshal(data, v)
	}
	big, ok := bigMembers(data)
	if !ok || len(big) == 0 {
		return json.Unmarshal(data, v)
	}
	fields := directFields(rv.Elem().Type())
	for i := range big {
		idx, ok := fields[big[i].key]
		if !ok {
			return json.Unmarshal(data, v)
		}
		big[i].field = idx
	}
	elem := rv.Elem()
	// A []byte field's memory, which the big value is decoded into when
	// it is large enough (DecodeParams), before the null below drops it.
	held := make([][]byte, len(big))
	for i, m := range big {
		if f := elem.Field(m.field); f.Kind() == reflect.Slice {
			held[i] = f.Bytes()
		}
	}
	// The rest of the object, with each big value replaced by null (which
	// leaves a string alone and sets a []byte to nil, then overwritten).
	small := make([]byte, 0, 512)
	last := 0
	for _, m := range big {
		small = append(small, data[last:m.start]...)
		small = append(small, "null"...)
		last = m.end
	}
	small = append(small, data[last:]...)
	if err := unmarshalSmall(small, v); err != nil {
		return err
	}
	for i, m := range big {
		f := elem.Field(m.field)
		body := data[m.start+1 : m.end-1]
		switch f.Kind() {
		case reflect.Slice:
			// An escape needs no look of its own: a backslash is not
			// base64, so the decode refuses it and encoding/json, which
			// resolves escapes, decodes the member instead.
			need := base64.StdEncoding.DecodedLen(len(body))
			b := held[i]
			if cap(b) >= need {
				b = b[:need]
			} else {
				b = make([]byte, need)
			}
			n, err := decodeBase64(b, body)
			if err != nil {
				return json.Unmarshal(data, v) // escapes, or encoding/json's own error
			}
			f.SetBytes(b[:n])
		case reflect.String:
			if bytes.IndexByte(body, '\\') >= 0 || !utf8.Valid(body) {
				var s string
				if err := json.Unmarshal(data[m.start:m.end], &s); err != nil {
					return err
				}
				f.SetString(s)
				continue
			}
			f.SetString(string(body))
		}
	}
	return nil
}

// jsonDecoder is a value with a hand-written decoder that gives
// json.Unmarshal's outcome (protocol.JSONDecoder; protocol's
// ArtifactWriteParams reads the small members of a chunk's params, which
// encoding/json's reflection otherwise spent more on than the rest of the
// cut). It must not keep data.
type jsonDecoder interface {
	DecodeJSON(data []byte) error
}

// unmarshalSmall is json.Unmarshal(data, v) for what is left of params
// once their big members are cut out, through v's own decoder if it has
// one.
func unmarshalSmall(data []byte, v any) error {
	if d, ok := v.(jsonDecoder); ok {
		return d.DecodeJSON(data)
	}
	return json.Unmarshal(data, v)
}

type bigMember struct {
	key        string
	start, end int // the value's string token, quotes included
	field      int
}

// bigMembers lists the string members of the top-level object data that
// are at least bigStringBytes long. It reports false when data is not an
// object or has a duplicate key among them, which encoding/json resolves
// by order.
func bigMembers(data []byte) ([]bigMember, bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	var big []bigMember
	var keys []string
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return nil, true
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, false
		}
		keyEnd, err := skipString(data, i, nil)
		if err != nil {
			return nil, false
		}
		key, ok := decodeString(data[i:keyEnd])
		if !ok {
			return nil, false
		}
		i = skipSpace(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return nil, false
		}
		i = skipSpace(data, i+1)
		var end int
		if data[i] == '"' {
			// data is known valid: find the closing quote, not validate.
			end = skipValidString(data, i)
		} else if end, err = skipValue(data, i, 1, nil); err != nil {
			return nil, false
		}
		for _, k := range keys {
			if strings.EqualFold(k, key) {
				return nil, false
			}
		}
		keys = append(keys, key)
		if data[i] == '"' && end-i >= bigStringBytes {
			big = append(big, bigMember{key: key, start: i, end: end})
		}
		i = skipSpace(data, end)
		if i >= len(data) {
			return nil, false
		}
		if data[i] == '}' {
			return big, true
		}
		if data[i] != ',' {
			return nil, false
		}
		i = skipSpace(data, i+1)
	}
}

var (
	bytesType  = reflect.TypeFor[[]byte]()
	stringType = reflect.TypeFor[string]()
	fieldCache sync.Map // reflect.Type -> map[string]int
)

// directFields maps the JSON names of t's own exported fields of type
// exactly []byte or string onto their indices. A name that another field
// of t also answers to, even by case, is left out, so only unambiguous
// fields take the direct path.
func directFields(t reflect.Type) map[string]int {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]int)
	}
	names := map[string]int{}
	count := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			// Embedded fields can promote names of their own; do not
			// guess how encoding/json would resolve them.
			fieldCache.Store(t, map[string]int{})
			return map[string]int{}
		}
		if !f.IsExported() {
			continue
		}
		name := f.Name
		tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" && opts == "" {
			continue
		}
		if tag != "" {
			name = tag
		}
		count[strings.ToLower(name)]++
		if (f.Type == bytesType || f.Type == stringType) && !strings.Contains(","+opts+",", ",string,") {
			names[name] = i
		}
	}
	for name := range names {
		if count[strings.ToLower(name)] > 1 {
			delete(names, name)
		}
	}
	fieldCache.Store(t, names)
	return names
}

// skipValidString returns the index past the string token of valid JSON
// that starts at data[i]: the first quote not escaped by a backslash.
func skipValidString(data []byte, i int) int {
	j := i + 1
	for {
		q := bytes.IndexByte(data[j:], '"')
		if q < 0 {
			return len(data)
		}
		j += q
		backslashes := 0
		for k := j - 1; k > i && data[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return j + 1
		}
		j++
	}
}
