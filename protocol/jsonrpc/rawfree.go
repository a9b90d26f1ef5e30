package jsonrpc

import (
	"encoding"
	"encoding/json"
	"reflect"
	"sync"
)

// encodesStrict reports whether encoding/json's output for any value of t
// keeps the strict JSON rule by construction, so appendValue need not scan
// it again (for an artifact chunk, 350 KiB of base64 per call). It holds
// for booleans, numbers, strings, []byte and the arrays, slices, maps,
// pointers and structs built of them: encoding/json writes invalid UTF-8
// in a string as U+FFFD and refuses NaN and infinities. It does not hold
// for what encoding/json copies as it is: a json.Marshaler's output (such
// as json.RawMessage), a json.Number, or an interface, whose dynamic value
// is unknown here.
func encodesStrict(t reflect.Type) bool {
	if v, ok := strictTypes.Load(t); ok {
		return v.(bool)
	}
	ok := strictType(t, map[reflect.Type]bool{})
	strictTypes.Store(t, ok)
	return ok
}

var (
	strictTypes    sync.Map // reflect.Type -> bool
	marshalerType  = reflect.TypeFor[json.Marshaler]()
	textMarshaler  = reflect.TypeFor[encoding.TextMarshaler]()
	jsonNumberType = reflect.TypeFor[json.Number]()
)

// strictType is encodesStrict without the cache; seen breaks cycles (a
// type being looked at is assumed strict until proved otherwise).
func strictType(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true
	}
	seen[t] = true
	if t == jsonNumberType {
		return false
	}
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		return false
	}
	if t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		// Its text is written as a JSON string, coerced like any other,
		// but as a map key or under ",string" the rules differ: be safe.
		return false
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String:
		return true
	case reflect.Slice, reflect.Array, reflect.Pointer:
		return strictType(t.Elem(), seen) // []byte included: base64 is ASCII
	case reflect.Map:
		return strictType(t.Key(), seen) && strictType(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if !strictType(t.Field(i).Type, seen) {
				return false
			}
		}
		return true
	}
	return false // interfaces, channels, functions, complex numbers
}
