package protocol

import (
	"bytes"
	"encoding/json"
	"time"
)

// Bounds of a captured telemetry event (telemetry.capture).
const (
	// MaxTelemetryNameBytes bounds an event's name.
	MaxTelemetryNameBytes = 128
	// MaxTelemetryPropertiesBytes bounds an event's properties, as JSON.
	MaxTelemetryPropertiesBytes = 64 << 10
)

// TelemetryCaptureParams records a named telemetry event (permission
// telemetry.capture).
type TelemetryCaptureParams struct {
	// ScopeID is one of the extension's configured scopes, or empty for
	// the machine.
	ScopeID string `json:"scope_id,omitempty"`
	// Name names the event: at most MaxTelemetryNameBytes, one line.
	Name string `json:"name"`
	// Properties are a JSON object of at most MaxTelemetryPropertiesBytes
	// that never carries scope (no scope or scope_id key): the scope is
	// ScopeID.
	Properties json.RawMessage `json:"properties,omitempty"`
}

// TelemetryCaptureResult acknowledges a recorded event.
type TelemetryCaptureResult struct{}

// TelemetryEvent is one named telemetry event the host recorded, as its
// telemetry log keeps it and a sink receives it.
type TelemetryEvent struct {
	// Name is the event's name.
	Name string `json:"name"`
	// ScopeID is the scope it was captured for, empty for the machine.
	ScopeID string `json:"scope_id,omitempty"`
	// Extension is the package that captured it, empty for the host's own.
	Extension string `json:"extension,omitempty"`
	// Properties are the event's properties, a JSON object.
	Properties json.RawMessage `json:"properties,omitempty"`
	// Time is when the host recorded it.
	Time time.Time `json:"time"`
}

// TelemetrySinkParams delivers a batch of recorded telemetry events, in
// the order they were recorded, to a package holding the permission
// telemetry.sink. A batch is a request with a deadline: a sink that
// falls behind fills its bounded buffer and the host drops what does not
// fit, counting it.
type TelemetrySinkParams struct {
	// Events are the batch, at least one.
	Events []TelemetryEvent `json:"events"`
}

// TelemetrySinkResult acknowledges a batch.
type TelemetrySinkResult struct{}

// CheckTelemetryCapture applies the spec's bounds to a capture: a
// non-empty one-line name of at most MaxTelemetryNameBytes, and
// properties (when set) a JSON object of at most
// MaxTelemetryPropertiesBytes with no scope or scope_id key. A refusal is
// invalid, naming the field.
func CheckTelemetryCapture(p TelemetryCaptureParams) error {
	switch {
	case p.Name == "":
		return Errorf(CodeInvalid, "name: a telemetry event needs a name")
	case len(p.Name) > MaxTelemetryNameBytes:
		return Errorf(CodeInvalid, "name: %d bytes, over the %d a telemetry event's name may have", len(p.Name), MaxTelemetryNameBytes)
	case bytes.ContainsAny([]byte(p.Name), "\x00\r\n"):
		return Errorf(CodeInvalid, "name: a telemetry event's name is one line")
	}
	if len(p.Properties) == 0 {
		return nil
	}
	if len(p.Properties) > MaxTelemetryPropertiesBytes {
		return Errorf(CodeInvalid, "properties: %d bytes, over the %d a telemetry event may carry", len(p.Properties), MaxTelemetryPropertiesBytes)
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(p.Properties, &props); err != nil || props == nil {
		return Errorf(CodeInvalid, "properties: a JSON object")
	}
	for _, key := range []string{"scope", "scope_id"} {
		if _, ok := props[key]; ok {
			return Errorf(CodeInvalid, "properties.%s: properties never carry scope; it is scope_id", key)
		}
	}
	return nil
}
