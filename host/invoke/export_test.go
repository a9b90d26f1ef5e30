package invoke

import "syscall"

// SetKillGroup replaces how the process group is signalled and returns a
// function that restores it.
func SetKillGroup(f func(pgid int, sig syscall.Signal) error) (restore func()) {
	old := killGroup
	killGroup = f
	return func() { killGroup = old }
}

// NewError makes an error of code c, as Invoke does.
func NewError(c Code, msg string) *Error { return newError(c, msg) }

// CheckStrict exposes the strict JSON rule.
var CheckStrict = checkStrict

// ReadMessage exposes how one line of the extension's is read: nil for a
// blank line, the code of the refusal otherwise.
func ReadMessage(line []byte) (ok bool, code Code) {
	m, e := readMessage(line)
	if e != nil {
		return false, e.Code
	}
	return m != nil, ""
}
