package sdk

import (
	"context"
	"slices"

	"github.com/open-conduit/open-conduit/protocol"
)

// serveTelemetrySink hands a batch of the host's telemetry events to
// Extension.TelemetrySink.
func serveTelemetrySink(s *server, ctx context.Context, p protocol.TelemetrySinkParams) (protocol.TelemetrySinkResult, error) {
	if s.ext.TelemetrySink == nil {
		// checkExtension refuses the permission without the handler, so
		// only a host that ignores the manifest gets here.
		return protocol.TelemetrySinkResult{}, protocol.Errorf(protocol.CodeUndeclared, "%s is no telemetry sink", s.manifest.Name)
	}
	return s.ext.TelemetrySink(ctx, s.host, p)
}

// CaptureTelemetry records a named telemetry event for one of the
// extension's configured scopes, or for the machine (p.ScopeID empty),
// through telemetry.capture: the manifest must hold the permission
// telemetry.capture. The host refuses a name over
// protocol.MaxTelemetryNameBytes and properties over
// protocol.MaxTelemetryPropertiesBytes or carrying scope, as invalid;
// the SDK checks them first.
func (h *Host) CaptureTelemetry(ctx context.Context, p protocol.TelemetryCaptureParams) error {
	if err := protocol.CheckTelemetryCapture(p); err != nil {
		return err
	}
	return h.c.Call(ctx, "telemetry.capture", p, &protocol.TelemetryCaptureResult{})
}

func holdsPermission(m *protocol.Manifest, permission string) bool {
	return slices.Contains(m.Permissions, permission)
}
