package host

import (
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
)

// Sources are the ingress sources the last successful configure
// registered, in name order. The composition root registers each with the
// engine (runtime.Config.Sources) through Remote.Ingress.
func (s *Service) Sources() []protocol.SourceDecl {
	g := s.generation()
	out := make([]protocol.SourceDecl, 0, len(g.sources))
	for _, src := range g.sources {
		out = append(out, src)
	}
	slices.SortFunc(out, func(a, b protocol.SourceDecl) int { return strings.Compare(a.Name, b.Name) })
	return out
}
