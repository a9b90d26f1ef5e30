package host

import "github.com/open-conduit/open-conduit/protocol/jsonrpc"

// WireError and ProtocolToRuntime expose the error mapping to the tests.
var (
	WireError         = wireError
	ProtocolToRuntime = protocolToRuntime
)

// SkipWorkCheck weakens svc into the negative control of the works
// checks: it accepts a draft naming any Work, seen or not.
func SkipWorkCheck(svc *Service) { svc.skipWorkCheck = true }

// HandshakeGate wraps inner in a shut handshake gate for the package
// name; openAfter opens it to the requests after the one numbered served.
func HandshakeGate(name string, inner jsonrpc.Handler) (h jsonrpc.Handler, openAfter func(served uint64)) {
	g := &handshakeGate{}
	return g.guard(name, inner), g.openAfter
}
