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
