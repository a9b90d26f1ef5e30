package jsonrpc

// ValidJSON exposes the single-pass validator to the external tests, which
// check it against encoding/json.
var ValidJSON = validJSON

// CheckStrict exposes the strict JSON rule's check (strict.go) to the fuzz
// target that compares it with what encoding/json and utf8 see.
var CheckStrict = checkStrict
