package sdk

import (
	"context"
	"slices"

	"github.com/open-conduit/open-conduit/protocol"
)

// validate serves the validate method: the object's type must be one the
// manifest declares for its kind, and then Extension.Validate, if any,
// decides.
func (s *server) validate(ctx context.Context, p protocol.ValidateParams) (protocol.ValidateResult, error) {
	declared, ok := validateTypes(s.manifest, p.Kind)
	if !ok {
		return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "validate: unknown kind %q", p.Kind)
	}
	if !slices.Contains(declared, p.Type) {
		return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "validate: %s %q is not declared by %s", p.Kind, p.Type, s.manifest.Name)
	}
	if s.ext.Validate == nil {
		return protocol.ValidateResult{}, nil
	}
	return s.ext.Validate(ctx, p)
}

// validateTypes lists the names the manifest declares for a validate kind.
func validateTypes(m *protocol.Manifest, kind string) ([]string, bool) {
	var out []string
	p := m.Provides
	switch kind {
	case protocol.ValidateExtension:
		for _, e := range p.Extensions {
			out = append(out, e.Type)
		}
	case protocol.ValidateRoute:
		for _, r := range p.Routes {
			out = append(out, r.Handler)
		}
	case protocol.ValidateBinding:
		for _, r := range p.Routes {
			if r.Binding {
				out = append(out, r.Handler)
			}
		}
	case protocol.ValidateExecutor:
		for _, e := range p.Executors {
			out = append(out, e.Name)
		}
	case protocol.ValidateConnection:
		for _, c := range p.Connections {
			out = append(out, c.Type)
		}
	default:
		return nil, false
	}
	return out, true
}
