package jsonrpc

// ValidJSON exposes the single-pass validator to the external tests, which
// check it against encoding/json.
var ValidJSON = validJSON
