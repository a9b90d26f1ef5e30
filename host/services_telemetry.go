package host

import (
	"context"

	"github.com/open-conduit/open-conduit/protocol"
)

// TelemetryRecorder records the telemetry events packages capture: the
// daemon stamps each with its clock's time, writes it to its telemetry log
// and hands it to every sink. It must not block on a sink.
type TelemetryRecorder interface {
	RecordTelemetry(ctx context.Context, ev protocol.TelemetryEvent) error
}

func init() {
	serviceMethods["telemetry.capture"] = serve((*Service).telemetryCapture)
}

// telemetryCapture serves telemetry.capture, which the manifest's
// permission gates (Service.call refuses it undeclared otherwise): the
// spec's bounds, then a scope the extension is configured for or the
// machine. The host names the extension; the recorder stamps the time.
func (s *Service) telemetryCapture(ctx context.Context, p protocol.TelemetryCaptureParams) (protocol.TelemetryCaptureResult, error) {
	var out protocol.TelemetryCaptureResult
	if s.cfg.Telemetry == nil {
		return out, protocol.NewError(protocol.CodeUnsupported, "no telemetry log here")
	}
	if err := protocol.CheckTelemetryCapture(p); err != nil {
		return out, err
	}
	if p.ScopeID != "" && !s.generation().scopes[p.ScopeID] {
		return out, protocol.Errorf(protocol.CodeUnauthorized, "scope %q is not one of the scopes %s is configured for", p.ScopeID, s.name)
	}
	ev := protocol.TelemetryEvent{Name: p.Name, ScopeID: p.ScopeID, Extension: s.name, Properties: p.Properties}
	return out, s.cfg.Telemetry.RecordTelemetry(ctx, ev)
}
