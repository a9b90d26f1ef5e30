package host

// WireError exposes the error mapping to the tests.
var WireError = wireError
