package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// The in-process form of a call. A host and an extension in the same
// process exchange Go values of the wire types instead of JSON: params is
// a value of the method's params type (such as KVGetParams, not a
// pointer) and result a pointer to its result type, which the callee
// fills. Over the wire the same call carries JSON. A callee accepts both
// forms through DecodeParams and answers through SetResult, so one
// handler serves either way.

// DecodeParams returns params as a T. A T value or a non-nil *T is used as
// it is; a json.RawMessage or []byte is unmarshalled (an empty one, or
// JSON null, gives the zero T); nil gives the zero T. Anything else, or
// JSON that does not fit T, is an error wrapping ErrInvalidParams.
func DecodeParams[T any](params any) (T, error) {
	var zero T
	switch p := params.(type) {
	case nil:
		return zero, nil
	case T:
		return p, nil
	case *T:
		if p == nil {
			return zero, nil
		}
		return *p, nil
	case json.RawMessage:
		return unmarshalParams[T](p)
	case []byte:
		return unmarshalParams[T](p)
	}
	return zero, fmt.Errorf("%w: params are a %T, want %s", ErrInvalidParams, params, typeName[T]())
}

func unmarshalParams[T any](data []byte) (T, error) {
	var v T
	if len(data) == 0 || string(data) == "null" {
		return v, nil
	}
	var err error
	if d, ok := any(&v).(JSONDecoder); ok {
		err = d.DecodeJSON(data) // a hand-written codec: opcall_json.go
	} else {
		err = json.Unmarshal(data, &v)
	}
	if err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return v, fmt.Errorf("%w: field %s must be %s, not %s", ErrInvalidParams, te.Field, jsonKind(te.Type), te.Value)
		}
		return v, fmt.Errorf("%w: %v", ErrInvalidParams, err)
	}
	return v, nil
}

// jsonKind names the JSON form of a Go type, for a message a peer in any
// language can read.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a JSON value"
}

func typeName[T any]() string { return reflect.TypeFor[T]().String() }

// SetResult stores v, the callee's answer, into result, the caller's
// pointer. A nil result discards v. When result is a *T and v a T (or a
// non-nil *T) it is assigned directly, with no encoding; a
// *json.RawMessage or *any receives v marshalled to JSON; any other
// pointer receives v through a JSON round trip, so a caller may decode
// into a type of its own. It fails when result is not a non-nil pointer
// or v does not fit it.
func SetResult(result any, v any) error {
	if result == nil {
		return nil
	}
	rv := reflect.ValueOf(result)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("protocol: result must be a non-nil pointer, got %T", result)
	}
	switch r := result.(type) {
	case *json.RawMessage:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("protocol: encoding result %T: %w", v, err)
		}
		*r = b
		return nil
	case *any:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("protocol: encoding result %T: %w", v, err)
		}
		*r = json.RawMessage(b)
		return nil
	}
	dst := rv.Elem()
	if v != nil {
		src := reflect.ValueOf(v)
		if src.Type().AssignableTo(dst.Type()) {
			dst.Set(src)
			return nil
		}
		if src.Kind() == reflect.Pointer && !src.IsNil() && src.Elem().Type().AssignableTo(dst.Type()) {
			dst.Set(src.Elem())
			return nil
		}
	}
	var b []byte
	switch raw := v.(type) {
	case json.RawMessage:
		b = raw
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return fmt.Errorf("protocol: encoding result %T: %w", v, err)
		}
	}
	if err := json.Unmarshal(b, result); err != nil {
		return fmt.Errorf("protocol: result %T does not fit %T: %w", v, result, err)
	}
	return nil
}
