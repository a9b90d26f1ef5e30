package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Code is a stable error code. Authored errors cross the wire as JSON-RPC
// error -32000 with the code in data.code; the protocol's transport codes
// use the reserved JSON-RPC numbers (see WireNumber). Every code maps one
// to one onto an exported sentinel error (see Sentinel), so errors.Is holds
// on both sides of the wire.
type Code string

// The codes of the spec's error table.
const (
	// CodeInvalid: the request or a config is invalid.
	CodeInvalid Code = "invalid"
	// CodeUnsupported: the extension does not support what was asked.
	CodeUnsupported Code = "unsupported"
	// CodeUnauthorized: the caller may not do this.
	CodeUnauthorized Code = "unauthorized"
	// CodeUndeclared: the manifest does not enable the method or surface.
	CodeUndeclared Code = "undeclared"
	// CodeNotFound: no such record, or none the caller may see.
	CodeNotFound Code = "not_found"
	// CodeConflict: a precondition, revision, identity or lease fence failed.
	CodeConflict Code = "conflict"
	// CodeCausalLimit: a causal chain's depth or rate bound was reached.
	CodeCausalLimit Code = "causal_limit"
	// CodeNotAdoptable: an executor cannot adopt an execution from its metadata.
	CodeNotAdoptable Code = "not_adoptable"
	// CodeNotAccepting: the extension accepts no new work now.
	CodeNotAccepting Code = "not_accepting"
	// CodeNothingToAttach: there is no session to attach to.
	CodeNothingToAttach Code = "nothing_to_attach"
	// CodeNotLive: the execution has no live output.
	CodeNotLive Code = "not_live"
	// CodeResourceSetupFailed: a resource was returned but its setup failed.
	CodeResourceSetupFailed Code = "resource_setup_failed"
	// CodeResourceNotFound: no such resource.
	CodeResourceNotFound Code = "resource_not_found"
	// CodeResourceExhausted: the provider has no room; its message says what to free.
	CodeResourceExhausted Code = "resource_exhausted"
	// CodeSandboxDenied: the launch needs something outside the sandbox policy.
	CodeSandboxDenied Code = "sandbox_denied"
	// CodeSandboxUnavailable: no sandbox could be had; nothing ran.
	CodeSandboxUnavailable Code = "sandbox_unavailable"
	// CodeContainerRunning: the container is still running.
	CodeContainerRunning Code = "container_running"
	// CodeContainerUnconfirmed: the container's state could not be confirmed.
	CodeContainerUnconfirmed Code = "container_unconfirmed"
	// CodeRetryAfter: try again later, optionally after data.reset_at. It is
	// the only code that crosses as a retry hint.
	CodeRetryAfter Code = "retry_after"
	// CodeUnreadableSchema: a payload is not the current version of one of
	// the writer's own schemas.
	CodeUnreadableSchema Code = "unreadable_schema"
	// CodeKVDowngrade: the manifest's kv_version is older than the stored layout.
	CodeKVDowngrade Code = "kv_downgrade"
)

// The protocol's own codes.
const (
	// CodeUnsupportedProtocolVersion: the peers share no protocol version.
	CodeUnsupportedProtocolVersion Code = "unsupported_protocol_version"
	// CodeReentrantCall: a callback arrived while an in-transaction call was outstanding.
	CodeReentrantCall Code = "reentrant_call"
	// CodeOverloaded: the receiver already serves MaxInflight requests; retry with backoff.
	CodeOverloaded Code = "overloaded"
	// CodeCancelled: the request was cancelled ($/cancel); JSON-RPC -32800.
	CodeCancelled Code = "cancelled"
	// CodeShuttingDown: the receiver is shutting down and takes no new requests.
	CodeShuttingDown Code = "shutting_down"
	// CodeInternal: an unauthored failure; the detail stays in the side's own log. JSON-RPC -32603.
	CodeInternal Code = "internal"
	// CodeParseError: the message was not valid JSON. JSON-RPC -32700.
	CodeParseError Code = "parse_error"
	// CodeMethodNotFound: no such method. JSON-RPC -32601.
	CodeMethodNotFound Code = "method_not_found"
	// CodeInvalidParams: the params do not fit the method. JSON-RPC -32602.
	CodeInvalidParams Code = "invalid_params"
)

// The JSON-RPC error numbers the protocol uses.
const (
	WireParseError     = -32700
	WireMethodNotFound = -32601
	WireInvalidParams  = -32602
	WireInternal       = -32603
	WireCancelled      = -32800
	WireAuthored       = -32000
)

// codeInfo is the single table behind Codes, Sentinel, WireNumber and the
// code table of the generated reference.
var codeInfo = []struct {
	code    Code
	wire    int
	meaning string
}{
	{CodeInvalid, WireAuthored, "The request, a config or an argument is invalid; the message says what."},
	{CodeUnsupported, WireAuthored, "The receiver does not support what was asked (an undeclared executor control, for example)."},
	{CodeUnauthorized, WireAuthored, "The caller may not do this."},
	{CodeUndeclared, WireAuthored, "The manifest does not enable this method or surface."},
	{CodeNotFound, WireAuthored, "No such record, or none the caller may see (a read is never an existence oracle)."},
	{CodeConflict, WireAuthored, "A precondition, revision, identity or lease fence failed; re-read and retry."},
	{CodeCausalLimit, WireAuthored, "A causal chain reached its depth or per-minute bound."},
	{CodeNotAdoptable, WireAuthored, "An executor cannot adopt an execution from its recovery metadata."},
	{CodeNotAccepting, WireAuthored, "The extension accepts no new work now."},
	{CodeNothingToAttach, WireAuthored, "There is no session to attach to."},
	{CodeNotLive, WireAuthored, "The execution has no live output."},
	{CodeResourceSetupFailed, WireAuthored, "A resource was returned but its setup failed."},
	{CodeResourceNotFound, WireAuthored, "No such resource."},
	{CodeResourceExhausted, WireAuthored, "The provider has no room; its message says what to free."},
	{CodeSandboxDenied, WireAuthored, "The launch needs something outside the sandbox policy; the message names it."},
	{CodeSandboxUnavailable, WireAuthored, "No sandbox or container could be had, so nothing ran."},
	{CodeContainerRunning, WireAuthored, "The container is still running."},
	{CodeContainerUnconfirmed, WireAuthored, "The container's state could not be confirmed."},
	{CodeRetryAfter, WireAuthored, "Try again later, after data.reset_at when given. The only retry hint."},
	{CodeUnreadableSchema, WireAuthored, "A payload is neither absent nor the current version of one of the writer's own schemas."},
	{CodeKVDowngrade, WireAuthored, "The manifest's kv_version is older than the stored KV layout."},
	{CodeUnsupportedProtocolVersion, WireAuthored, "The peers share no protocol version; refused before any other call."},
	{CodeReentrantCall, WireAuthored, "A callback arrived while an in-transaction call was outstanding."},
	{CodeOverloaded, WireAuthored, "The receiver already serves its maximum of requests; retry with backoff."},
	{CodeShuttingDown, WireAuthored, "The receiver is shutting down and takes no new requests."},
	{CodeCancelled, WireCancelled, "The request was cancelled with $/cancel."},
	{CodeInternal, WireInternal, "An unauthored failure; the detail stays in the side's own log."},
	{CodeParseError, WireParseError, "The message was not valid JSON."},
	{CodeMethodNotFound, WireMethodNotFound, "No such method, or one the receiver does not serve."},
	{CodeInvalidParams, WireInvalidParams, "The params do not fit the method."},
}

// The sentinel errors, one per code. Match with errors.Is; add context with %w.
var (
	ErrInvalid                    = NewError(CodeInvalid, "invalid")
	ErrUnsupported                = NewError(CodeUnsupported, "unsupported")
	ErrUnauthorized               = NewError(CodeUnauthorized, "unauthorized")
	ErrUndeclared                 = NewError(CodeUndeclared, "undeclared")
	ErrNotFound                   = NewError(CodeNotFound, "not found")
	ErrConflict                   = NewError(CodeConflict, "conflict")
	ErrCausalLimit                = NewError(CodeCausalLimit, "causal limit reached")
	ErrNotAdoptable               = NewError(CodeNotAdoptable, "not adoptable")
	ErrNotAccepting               = NewError(CodeNotAccepting, "not accepting")
	ErrNothingToAttach            = NewError(CodeNothingToAttach, "nothing to attach")
	ErrNotLive                    = NewError(CodeNotLive, "not live")
	ErrResourceSetupFailed        = NewError(CodeResourceSetupFailed, "resource setup failed")
	ErrResourceNotFound           = NewError(CodeResourceNotFound, "resource not found")
	ErrResourceExhausted          = NewError(CodeResourceExhausted, "resource exhausted")
	ErrSandboxDenied              = NewError(CodeSandboxDenied, "sandbox denied")
	ErrSandboxUnavailable         = NewError(CodeSandboxUnavailable, "sandbox unavailable")
	ErrContainerRunning           = NewError(CodeContainerRunning, "container running")
	ErrContainerUnconfirmed       = NewError(CodeContainerUnconfirmed, "container unconfirmed")
	ErrRetryAfter                 = NewError(CodeRetryAfter, "retry after")
	ErrUnreadableSchema           = NewError(CodeUnreadableSchema, "unreadable schema")
	ErrKVDowngrade                = NewError(CodeKVDowngrade, "kv layout downgrade")
	ErrUnsupportedProtocolVersion = NewError(CodeUnsupportedProtocolVersion, "unsupported protocol version")
	ErrReentrantCall              = NewError(CodeReentrantCall, "reentrant call")
	ErrOverloaded                 = NewError(CodeOverloaded, "overloaded")
	ErrCancelled                  = NewError(CodeCancelled, "cancelled")
	ErrShuttingDown               = NewError(CodeShuttingDown, "shutting down")
	ErrInternal                   = NewError(CodeInternal, "internal error")
	ErrParseError                 = NewError(CodeParseError, "parse error")
	ErrMethodNotFound             = NewError(CodeMethodNotFound, "method not found")
	ErrInvalidParams              = NewError(CodeInvalidParams, "invalid params")
)

var sentinels = map[Code]*Error{}

func init() {
	for _, e := range []*Error{
		ErrInvalid, ErrUnsupported, ErrUnauthorized, ErrUndeclared, ErrNotFound, ErrConflict,
		ErrCausalLimit, ErrNotAdoptable, ErrNotAccepting, ErrNothingToAttach, ErrNotLive,
		ErrResourceSetupFailed, ErrResourceNotFound, ErrResourceExhausted, ErrSandboxDenied,
		ErrSandboxUnavailable, ErrContainerRunning, ErrContainerUnconfirmed, ErrRetryAfter,
		ErrUnreadableSchema, ErrKVDowngrade, ErrUnsupportedProtocolVersion, ErrReentrantCall,
		ErrOverloaded, ErrCancelled, ErrShuttingDown, ErrInternal, ErrParseError,
		ErrMethodNotFound, ErrInvalidParams,
	} {
		sentinels[e.Code] = e
	}
}

// Codes lists every code, in table order.
func Codes() []Code {
	out := make([]Code, len(codeInfo))
	for i, c := range codeInfo {
		out[i] = c.code
	}
	return out
}

// Sentinel returns the sentinel error of c, or nil for an unknown code.
func Sentinel(c Code) *Error { return sentinels[c] }

// WireNumber is the JSON-RPC error number c crosses as.
func (c Code) WireNumber() int {
	for _, i := range codeInfo {
		if i.code == c {
			return i.wire
		}
	}
	return WireAuthored
}

// String returns the code as it crosses the wire.
func (c Code) String() string { return string(c) }

// MarshalText implements encoding.TextMarshaler.
func (c Code) MarshalText() ([]byte, error) { return []byte(c), nil }

// Error is an error with a stable code. The sentinels are *Error values;
// an Error matches a sentinel with errors.Is when their codes are equal.
type Error struct {
	Code    Code
	Message string
	// ResetAt is the moment a retry_after hint expires; zero when unknown.
	ResetAt time.Time
}

// NewError returns an error with code c and message msg.
func NewError(c Code, msg string) *Error { return &Error{Code: c, Message: msg} }

// Errorf returns an error with code c and a formatted message.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

// RetryAfter returns the retry hint, the only error that tells a caller to
// wait: resetAt may be zero.
func RetryAfter(msg string, resetAt time.Time) *Error {
	return &Error{Code: CodeRetryAfter, Message: msg, ResetAt: resetAt}
}

func (e *Error) Error() string {
	if e.Message == "" || e.Message == string(e.Code) {
		return string(e.Code)
	}
	return e.Message
}

// Is matches any *Error with the same code, so errors.Is(err, ErrConflict)
// holds for a conflict decoded from the wire.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && t.Code == e.Code
}

// wireErrorData is the data object of an authored wire error.
type wireErrorData struct {
	Code    Code       `json:"code"`
	ResetAt *time.Time `json:"reset_at,omitempty"`
}

// WireData returns the message and data object e crosses the wire with.
// The transport sends it as error -32000 (or the code's reserved number).
func (e *Error) WireData() (message string, data any) {
	d := wireErrorData{Code: e.Code}
	if e.Code == CodeRetryAfter && !e.ResetAt.IsZero() {
		t := e.ResetAt.UTC()
		d.ResetAt = &t
	}
	return e.Message, d
}

// WireNumber is the JSON-RPC error number e crosses as.
func (e *Error) WireNumber() int { return e.Code.WireNumber() }

// CodeOf returns the code of the first *Error in err's chain, CodeCancelled
// for a context cancellation and CodeInternal otherwise (including nil).
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.Canceled) {
		return CodeCancelled
	}
	return CodeInternal
}

// codeMeaning is the one-line meaning of c for the generated reference.
func codeMeaning(c Code) string {
	for _, i := range codeInfo {
		if i.code == c {
			return i.meaning
		}
	}
	return ""
}

// DecodeWireError turns a JSON-RPC error as received into an *Error whose
// code matches its sentinel. An authored error keeps its message verbatim;
// an unknown authored code keeps its code (it does not match any sentinel).
func DecodeWireError(number int, message string, data json.RawMessage) *Error {
	if number == WireAuthored {
		var d wireErrorData
		if len(data) > 0 && json.Unmarshal(data, &d) == nil && d.Code != "" {
			e := &Error{Code: d.Code, Message: message}
			if d.ResetAt != nil && d.Code == CodeRetryAfter {
				e.ResetAt = *d.ResetAt
			}
			return e
		}
		return &Error{Code: CodeInternal, Message: message}
	}
	for _, i := range codeInfo {
		if i.wire == number && i.wire != WireAuthored {
			return &Error{Code: i.code, Message: message}
		}
	}
	return &Error{Code: CodeInternal, Message: message}
}
