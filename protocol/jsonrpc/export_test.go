package jsonrpc

// ValidJSON exposes the single-pass validator to the external tests, which
// check it against encoding/json.
var ValidJSON = validJSON

// CheckStrict exposes the strict JSON rule's check (strict.go) to the fuzz
// target that compares it with what encoding/json and utf8 see.
var CheckStrict = checkStrict

// EncodesStrict exposes the types whose encoding is strict by construction.
var EncodesStrict = encodesStrict

// SetAlwaysCheckStrict makes every encoded value be scanned for the strict
// rule, as before encodesStrict, for a benchmark's baseline.
func SetAlwaysCheckStrict(on bool) (restore func()) {
	alwaysCheckStrict = on
	return func() { alwaysCheckStrict = false }
}

// SetMaxIdleHandlers sets how many handler goroutines a Conn keeps parked;
// 0 starts a goroutine for every request, as before they were kept.
func SetMaxIdleHandlers(n int32) (restore func()) {
	old := maxIdleHandlers
	maxIdleHandlers = n
	return func() { maxIdleHandlers = old }
}

// Handoffs is how often c's reading passed from an Eager handler to a new
// goroutine.
func Handoffs(c *Conn) int64 { return c.handoffs.Load() }
