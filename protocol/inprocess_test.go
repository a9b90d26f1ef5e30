package protocol_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

func TestDecodeParams(t *testing.T) {
	want := protocol.KVGetParams{Namespace: "notes", Key: "k"}
	for _, tc := range []struct {
		name   string
		params any
		want   protocol.KVGetParams
	}{
		{"value", want, want},
		{"pointer", &want, want},
		{"raw JSON", json.RawMessage(`{"namespace":"notes","key":"k"}`), want},
		{"bytes", []byte(`{"namespace":"notes","key":"k"}`), want},
		{"nil", nil, protocol.KVGetParams{}},
		{"nil pointer", (*protocol.KVGetParams)(nil), protocol.KVGetParams{}},
		{"JSON null", json.RawMessage(`null`), protocol.KVGetParams{}},
		{"empty JSON", json.RawMessage(nil), protocol.KVGetParams{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := protocol.DecodeParams[protocol.KVGetParams](tc.params)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	for _, tc := range []struct {
		name   string
		params any
		msg    string
	}{
		{"other type", protocol.KVListParams{}, "params are a protocol.KVListParams, want protocol.KVGetParams"},
		{"wrong field type", json.RawMessage(`{"namespace":5}`), "field namespace must be a string, not number"},
		{"not JSON", json.RawMessage(`{`), "unexpected end of JSON input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := protocol.DecodeParams[protocol.KVGetParams](tc.params)
			assert.ErrorIs(t, err, protocol.ErrInvalidParams)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestSetResult(t *testing.T) {
	v := protocol.KVGetResult{Found: true, Value: json.RawMessage(`"x"`), Version: "v1"}

	var direct protocol.KVGetResult
	require.NoError(t, protocol.SetResult(&direct, v))
	assert.Equal(t, v, direct)

	var fromPointer protocol.KVGetResult
	require.NoError(t, protocol.SetResult(&fromPointer, &v))
	assert.Equal(t, v, fromPointer)

	var raw json.RawMessage
	require.NoError(t, protocol.SetResult(&raw, v))
	assert.JSONEq(t, `{"found":true,"value":"x","version":"v1"}`, string(raw))

	var anything any
	require.NoError(t, protocol.SetResult(&anything, v))
	assert.JSONEq(t, `{"found":true,"value":"x","version":"v1"}`, string(anything.(json.RawMessage)))

	// A caller's own type receives the value through JSON.
	var own struct {
		Found   bool   `json:"found"`
		Version string `json:"version"`
	}
	require.NoError(t, protocol.SetResult(&own, v))
	assert.True(t, own.Found)
	assert.Equal(t, "v1", own.Version)

	// Raw JSON into a typed result, as a callee answering in JSON does.
	var typed protocol.KVGetResult
	require.NoError(t, protocol.SetResult(&typed, json.RawMessage(`{"found":true,"value":"x","version":"v1"}`)))
	assert.Equal(t, v, typed)

	require.NoError(t, protocol.SetResult(nil, v), "a nil result discards")
	assert.Error(t, protocol.SetResult(direct, v), "not a pointer")
	assert.Error(t, protocol.SetResult((*protocol.KVGetResult)(nil), v), "a nil pointer")
	var wrong protocol.KVListResult
	assert.Error(t, protocol.SetResult(&wrong, json.RawMessage(`{"items":5}`)), "JSON that does not fit")
}
