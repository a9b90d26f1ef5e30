package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// The conversions from the runtime's records to the API's wire types.

func wireEvent(e runtime.Event) client.Event {
	return client.Event{ID: e.ID, Sequence: e.Sequence, Source: e.Source, DeliveryID: e.DeliveryID, ScopeID: e.ScopeID,
		Family: e.Family, Type: e.Type, Schema: e.Schema, Payload: e.Payload, Parent: e.Parent, Root: e.Root,
		Depth: e.Depth, Works: e.Works, OccurredAt: e.OccurredAt, AcceptedAt: e.AcceptedAt}
}

func wireWork(w runtime.Work) client.Work {
	out := client.Work{ID: w.ID, ScopeID: w.ScopeID, Kind: w.Kind, Binding: w.Binding, State: string(w.State),
		CorrelationKeys: w.CorrelationKeys, Grants: w.Grants, Revision: w.Revision, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
	if len(w.Context) > 0 && json.Valid(w.Context) {
		out.Context = w.Context
	}
	if len(w.Display) > 0 {
		var d runtime.Display
		// The router stores only displays that passed ValidateDisplay; one
		// that does not decode is left out rather than shown half.
		if json.Unmarshal(w.Display, &d) == nil {
			out.Display = wireDisplay(&d)
		}
	}
	return out
}

func wireDisplay(d *runtime.Display) *protocol.Display {
	if d == nil {
		return nil
	}
	out := &protocol.Display{Title: d.Title, Ref: d.Ref, Requester: d.Requester}
	for _, l := range d.Links {
		out.Links = append(out.Links, protocol.DisplayLink{Label: l.Label, URL: l.URL})
	}
	return out
}

func wireWait(w runtime.Wait, scope string) client.Wait {
	return client.Wait{ID: w.ID, WorkID: w.WorkID, ScopeID: scope, Keys: w.Keys, Target: w.Target,
		Description: w.Description, Progress: w.Progress, State: string(w.State), Due: w.Deadline, CreatedAt: w.CreatedAt}
}

func wireExecutions(xs []runtime.Execution) []client.Execution {
	out := make([]client.Execution, 0, len(xs))
	for _, x := range xs {
		out = append(out, client.Execution{ID: x.ID, WorkID: x.WorkID, Attempt: x.Attempt, Executor: x.Executor,
			Epoch: x.Epoch, State: string(x.State), Error: x.Error, Recoverable: len(x.Recovery) > 0,
			StartedAt: x.StartedAt, EndedAt: x.EndedAt})
	}
	return out
}

// maxBodyDepth bounds how deeply a request body may nest.
const maxBodyDepth = 64

// decodeStrict decodes one JSON value into v, refusing invalid UTF-8,
// duplicate keys, nesting deeper than maxBodyDepth, unknown fields and
// anything after the value. Every refusal is invalid_request.
func decodeStrict(data []byte, v any) error {
	if err := checkJSON(data); err != nil {
		return client.Errorf(client.CodeInvalidRequest, "request body: %v", err)
	}
	// encoding/json matches member names without regard to case; the API
	// takes only its exact names.
	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		return client.Errorf(client.CodeInvalidRequest, "request body: %v", err)
	}
	if err := checkNames(tree, reflect.TypeOf(v), "$"); err != nil {
		return client.Errorf(client.CodeInvalidRequest, "request body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return client.Errorf(client.CodeInvalidRequest, "request body: %v", err)
	}
	return nil
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// checkNames refuses a member of a JSON object that is not exactly one of
// the names of the struct it decodes into. Free-form values (RawMessage,
// maps, interfaces) take any names.
func checkNames(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil // a mismatched type is encoding/json's to refuse
		}
		fields := jsonFields(t)
		for name, member := range obj {
			ft, ok := fields[name]
			if !ok {
				return fmt.Errorf("unknown field %q at %s", clipForMessage(name), path)
			}
			if err := checkNames(member, ft, path+"."+name); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		arr, _ := v.([]any)
		for i, e := range arr {
			if err := checkNames(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields maps a struct's JSON member names onto their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
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

// checkJSON walks data's tokens: one well-formed value, valid UTF-8, no
// duplicate key in an object, bounded depth, nothing after it.
func checkJSON(data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := walkJSON(dec, 0); err != nil {
		if err == io.EOF {
			return errors.New("empty body")
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

func walkJSON(dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth == maxBodyDepth {
		return fmt.Errorf("nested deeper than %d", maxBodyDepth)
	}
	switch delim {
	case '{':
		keys := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := tok.(string)
			if keys[key] {
				return fmt.Errorf("duplicate key %q", clipForMessage(key))
			}
			keys[key] = true
			if err := walkJSON(dec, depth+1); err != nil {
				return unexpectedEOF(err)
			}
		}
	case '[':
		for dec.More() {
			if err := walkJSON(dec, depth+1); err != nil {
				return unexpectedEOF(err)
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return unexpectedEOF(err)
}

// unexpectedEOF turns an end of input inside a value into a syntax error.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
