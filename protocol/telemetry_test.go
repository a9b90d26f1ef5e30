package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/open-conduit/open-conduit/protocol"
)

// FuzzCheckTelemetryCapture: whatever a package sends, the check never
// panics, and what it accepts is within the spec's bounds: a one-line
// name of at most MaxTelemetryNameBytes, and properties absent or a JSON
// object of at most MaxTelemetryPropertiesBytes without scope keys.
func FuzzCheckTelemetryCapture(f *testing.F) {
	for _, seed := range []struct{ name, props string }{
		{"notes.synced", `{"notes":3}`},
		{"", ""},
		{"a\nb", `{}`},
		{"x", `{"scope":"other"}`},
		{"x", `{"scope_id":"other"}`},
		{"x", `[1,2]`},
		{"x", `null`},
		{"x", `{"a":{"scope":"nested is fine"}}`},
		{strings.Repeat("n", protocol.MaxTelemetryNameBytes+1), `{}`},
	} {
		f.Add(seed.name, seed.props)
	}
	f.Fuzz(func(t *testing.T, name, props string) {
		p := protocol.TelemetryCaptureParams{Name: name, Properties: json.RawMessage(props)}
		err := protocol.CheckTelemetryCapture(p)
		if err != nil {
			assert.ErrorIs(t, err, protocol.ErrInvalid)
			return
		}
		assert.NotEmpty(t, name)
		assert.LessOrEqual(t, len(name), protocol.MaxTelemetryNameBytes)
		assert.NotContains(t, name, "\n")
		if props == "" {
			return
		}
		assert.LessOrEqual(t, len(props), protocol.MaxTelemetryPropertiesBytes)
		var m map[string]json.RawMessage
		if assert.NoError(t, json.Unmarshal([]byte(props), &m)) {
			assert.NotContains(t, m, "scope")
			assert.NotContains(t, m, "scope_id")
		}
	})
}

func TestCheckTelemetryCaptureNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		p     protocol.TelemetryCaptureParams
		field string
	}{
		{protocol.TelemetryCaptureParams{}, "name"},
		{protocol.TelemetryCaptureParams{Name: "x", Properties: json.RawMessage(`"s"`)}, "properties"},
		{protocol.TelemetryCaptureParams{Name: "x", Properties: json.RawMessage(`{"scope":1}`)}, "properties.scope"},
	} {
		err := protocol.CheckTelemetryCapture(tc.p)
		if assert.Error(t, err) {
			assert.Contains(t, err.Error(), tc.field+":")
		}
	}
	assert.NoError(t, protocol.CheckTelemetryCapture(protocol.TelemetryCaptureParams{Name: "x", Properties: json.RawMessage(`{"a":{"scope":1}}`)}),
		"only a top-level key names scope")
}
