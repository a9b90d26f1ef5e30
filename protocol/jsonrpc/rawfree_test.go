package jsonrpc_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/stretchr/testify/assert"
)

type plainChunk struct {
	Upload string         `json:"upload"`
	Offset int64          `json:"offset"`
	Data   []byte         `json:"data"`
	Tags   map[string]int `json:"tags"`
	Next   *plainChunk    `json:"next"`
	Pair   [2]float64     `json:"pair"`
}

type marshalsItself struct{}

func (marshalsItself) MarshalJSON() ([]byte, error) { return []byte("\"\xff\""), nil }

type holdsMarshaler struct{ M []marshalsItself }

// Only types whose encoding cannot carry raw JSON skip the strict scan;
// each kind that can (a Marshaler, RawMessage, Number, an interface, a
// TextMarshaler) is scanned, however deep it sits.
func TestEncodesStrict(t *testing.T) {
	for _, v := range []any{true, 3, 2.5, "text", []byte("x"), plainChunk{}, &plainChunk{}, map[int]string{}} {
		assert.True(t, jsonrpc.EncodesStrict(reflect.TypeOf(v)), "%T", v)
	}
	for _, v := range []any{
		json.RawMessage(`1`),
		struct{ R json.RawMessage }{},
		struct{ N json.Number }{},
		struct{ X any }{},
		map[string]any{},
		[]marshalsItself{},
		holdsMarshaler{},
		struct{ T time.Time }{}, // a Marshaler
		&struct{ P *json.RawMessage }{},
	} {
		assert.False(t, jsonrpc.EncodesStrict(reflect.TypeOf(v)), "%T", v)
	}
}

// A value whose encoding breaks the strict rule through a Marshaler deep in
// a type is still refused: the scan was not skipped for it.
func TestStrictScanKeptForRawJSON(t *testing.T) {
	a, _ := pipePair(t, nil, echoHandler(), nil, nil)
	err := a.Call(t.Context(), "echo", holdsMarshaler{M: []marshalsItself{{}}}, nil)
	assert.ErrorContains(t, err, "refuses")
	err = a.Call(t.Context(), "echo", struct{ N json.Number }{N: "1e999"}, nil)
	assert.ErrorContains(t, err, "refuses")
}
