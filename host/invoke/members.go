package invoke

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
)

// errMemberName refuses a member whose name matches a field only when
// case is ignored, as encoding/json would read it.
var errMemberName = errors.New("a member name that is not exactly a field's")

// decodeExact decodes raw into v (a pointer) with no unknown member and
// every member name exactly a field's JSON name, at every depth:
// encoding/json alone would read "Result" or "jsonrpC" as their fields.
func decodeExact(raw []byte, v any) error {
	if err := checkMembers(raw, reflect.TypeOf(v).Elem()); err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errTrailing
	}
	return nil
}

// checkMembers walks raw alongside the Go type t and refuses an object
// member of a struct that does not name one of its fields exactly.
func checkMembers(raw json.RawMessage, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeOf(json.RawMessage(nil)) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		var members map[string]json.RawMessage
		if json.Unmarshal(raw, &members) != nil {
			return nil // not an object: the decode refuses it
		}
		fields := jsonFields(t)
		for name, value := range members {
			f, ok := fields[name]
			if !ok {
				return errMemberName
			}
			if err := checkMembers(value, f); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for _, item := range items {
			if err := checkMembers(item, t.Elem()); err != nil {
				return err
			}
		}
	case reflect.Map:
		var values map[string]json.RawMessage
		if json.Unmarshal(raw, &values) != nil {
			return nil
		}
		for _, value := range values {
			if err := checkMembers(value, t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields maps the JSON names of t's exported fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
