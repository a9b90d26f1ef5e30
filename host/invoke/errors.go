package invoke

import (
	"errors"
	"strings"
)

// Code is the fixed code every failure of an invocation ends in.
type Code string

// The codes, one per way an invocation can fail.
const (
	// CodeInvalidInvocation: the request or the limits are invalid (the
	// package's manifest, the method, the params, the environment, a limit
	// out of its range). Nothing was started.
	CodeInvalidInvocation Code = "invalid_invocation"
	// CodePrerequisiteMissing: the package's program is missing or not
	// executable, or the process could not be started.
	CodePrerequisiteMissing Code = "prerequisite_missing"
	// CodeProtocolInvalid: the extension wrote something that is not the
	// protocol: a line that is not strict JSON or not a JSON-RPC message,
	// an answer with the wrong id, an initialize answer the manifest does
	// not match.
	CodeProtocolInvalid Code = "protocol_invalid"
	// CodePluginFailed: the extension answered with an error, exited
	// before answering or with a non-zero status, or a pipe failed.
	CodePluginFailed Code = "plugin_failed"
	// CodeSizeLimit: the request or an output stream passed its byte
	// limit; Error.Stream says which.
	CodeSizeLimit Code = "size_limit"
	// CodeTimeout: the wall-time limit passed first.
	CodeTimeout Code = "timeout"
	// CodeCancelled: the caller's context ended first.
	CodeCancelled Code = "cancelled"
	// CodeCleanupFailed: the process group could not be signalled, the
	// process was not reaped within the cleanup budget, or the temporary
	// directory could not be removed.
	CodeCleanupFailed Code = "cleanup_failed"
)

// Stream names what a size_limit was exceeded on.
type Stream string

// The streams of a size_limit.
const (
	StreamRequest Stream = "request"
	StreamStdout  Stream = "stdout"
	StreamStderr  Stream = "stderr"
)

// The sentinel errors, one per code: errors.Is(err, ErrTimeout) holds for
// every error Invoke returns with code timeout.
var (
	ErrInvalidInvocation   = sentinel(CodeInvalidInvocation)
	ErrPrerequisiteMissing = sentinel(CodePrerequisiteMissing)
	ErrProtocolInvalid     = sentinel(CodeProtocolInvalid)
	ErrPluginFailed        = sentinel(CodePluginFailed)
	ErrSizeLimit           = sentinel(CodeSizeLimit)
	ErrTimeout             = sentinel(CodeTimeout)
	ErrCancelled           = sentinel(CodeCancelled)
	ErrCleanupFailed       = sentinel(CodeCleanupFailed)
)

// sentinels is the one table of codes and their sentinels.
var sentinels = []*Error{
	ErrInvalidInvocation, ErrPrerequisiteMissing, ErrProtocolInvalid, ErrPluginFailed,
	ErrSizeLimit, ErrTimeout, ErrCancelled, ErrCleanupFailed,
}

func sentinel(c Code) *Error {
	return &Error{Code: c, Message: strings.ReplaceAll(string(c), "_", " "), sentinel: true}
}

// Codes lists every code, in the order of the table.
func Codes() []Code {
	out := make([]Code, len(sentinels))
	for i, s := range sentinels {
		out[i] = s.Code
	}
	return out
}

// Sentinel returns the sentinel error of c, nil for a code not in the
// table.
func Sentinel(c Code) *Error {
	for _, s := range sentinels {
		if s.Code == c {
			return s
		}
	}
	return nil
}

// CodeOf returns the code of the first *Error in err's chain, "" when
// there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Error is a failed invocation. Its message is the host's own fixed
// sentence: it never holds the params, the environment, the extension's
// output or messages, or a path.
type Error struct {
	// Code is the failure's code.
	Code Code `json:"code"`
	// Message says what happened, in the host's words.
	Message string `json:"message"`
	// Stream is what passed its limit, for a size_limit only.
	Stream Stream `json:"stream,omitempty"`
	// Detached reports that after the process group was killed something
	// outside it (a descendant that left the group) still held the
	// extension's output open. It was not killed: the host let go of the
	// pipes and left it to the operating system.
	Detached bool `json:"detached,omitempty"`
	// Cleanup is the cleanup failure that followed this error, when
	// cleanup failed too (its code is cleanup_failed); errors.Is finds it.
	Cleanup *Error `json:"cleanup,omitempty"`

	sentinel bool
}

func (e *Error) Error() string {
	s := string(e.Code) + ": " + e.Message
	if e.Stream != "" && !strings.Contains(e.Message, string(e.Stream)) {
		s += " (" + string(e.Stream) + ")"
	}
	if e.Detached {
		s += "; a descendant that left the process group still held the output and was not killed"
	}
	if e.Cleanup != nil {
		s += "; then " + e.Cleanup.Error()
	}
	return s
}

// Is matches the sentinel of the error's code, and that of the cleanup
// failure that followed it.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || !t.sentinel {
		return false
	}
	return t.Code == e.Code || (e.Cleanup != nil && t.Code == e.Cleanup.Code)
}

func newError(c Code, msg string) *Error { return &Error{Code: c, Message: msg} }
