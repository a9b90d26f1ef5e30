package host

// WireError and ProtocolToRuntime expose the error mapping to the tests.
var (
	WireError         = wireError
	ProtocolToRuntime = protocolToRuntime
)

// SkipWorkCheck weakens svc into the negative control of the works
// checks: it accepts a draft naming any Work, seen or not.
func SkipWorkCheck(svc *Service) { svc.skipWorkCheck = true }
