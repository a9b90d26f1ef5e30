package host

// WireError and ProtocolToRuntime expose the error mapping to the tests.
var (
	WireError         = wireError
	ProtocolToRuntime = protocolToRuntime
)
