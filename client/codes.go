package client

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is a stable error code of the management API. An error crosses as
// the body {"error":{"code":"…","message":"…"}} with the HTTP status of its
// code (see codeTable); the client turns it back into an *Error that
// errors.Is matches against the code's sentinel.
type Code string

// The management API's error codes.
const (
	// CodeInvalidRequest: the request is malformed: bad JSON, an unknown
	// field, a bad parameter, a body too large.
	CodeInvalidRequest Code = "invalid_request"
	// CodeNotFound: no such route, scope, event, work, sample or record.
	CodeNotFound Code = "not_found"
	// CodeConflict: the request clashes with the stored state (a revision,
	// a terminal Work, an identity already taken).
	CodeConflict Code = "conflict"
	// CodeConfigInvalid: a configuration was refused; the body carries
	// every diagnostic.
	CodeConfigInvalid Code = "config_invalid"
	// CodeUnavailable: the daemon cannot serve this now (starting, shutting
	// down, the store is closed).
	CodeUnavailable Code = "unavailable"
	// CodeMethodNotAllowed: the route exists but not with this HTTP method.
	CodeMethodNotAllowed Code = "method_not_allowed"
	// CodeInternal: an unexpected failure; the detail stays in the daemon's
	// log.
	CodeInternal Code = "internal"
)

// The sentinels, one per code: errors.Is(err, ErrNotFound) holds for any
// *Error with CodeNotFound.
var (
	ErrInvalidRequest   = &Error{Code: CodeInvalidRequest, Message: "invalid request"}
	ErrNotFound         = &Error{Code: CodeNotFound, Message: "not found"}
	ErrConflict         = &Error{Code: CodeConflict, Message: "conflict"}
	ErrConfigInvalid    = &Error{Code: CodeConfigInvalid, Message: "configuration refused"}
	ErrUnavailable      = &Error{Code: CodeUnavailable, Message: "unavailable"}
	ErrMethodNotAllowed = &Error{Code: CodeMethodNotAllowed, Message: "method not allowed"}
	ErrInternal         = &Error{Code: CodeInternal, Message: "internal error"}
)

// codeTable is the one mapping of codes onto HTTP statuses and sentinels.
// Statuses are one to one, so a status read without a body still names
// its code.
var codeTable = []struct {
	code     Code
	status   int
	sentinel *Error
}{
	{CodeInvalidRequest, http.StatusBadRequest, ErrInvalidRequest},
	{CodeNotFound, http.StatusNotFound, ErrNotFound},
	{CodeMethodNotAllowed, http.StatusMethodNotAllowed, ErrMethodNotAllowed},
	{CodeConflict, http.StatusConflict, ErrConflict},
	{CodeConfigInvalid, http.StatusUnprocessableEntity, ErrConfigInvalid},
	{CodeInternal, http.StatusInternalServerError, ErrInternal},
	{CodeUnavailable, http.StatusServiceUnavailable, ErrUnavailable},
}

// Codes lists every code, in the table's order.
func Codes() []Code {
	out := make([]Code, len(codeTable))
	for i, row := range codeTable {
		out[i] = row.code
	}
	return out
}

// Valid reports whether c is one of the codes.
func (c Code) Valid() bool {
	for _, row := range codeTable {
		if row.code == c {
			return true
		}
	}
	return false
}

// String returns the code's wire form.
func (c Code) String() string { return string(c) }

// HTTPStatus is the HTTP status the code crosses with; an unknown code
// crosses as internal.
func (c Code) HTTPStatus() int {
	for _, row := range codeTable {
		if row.code == c {
			return row.status
		}
	}
	return http.StatusInternalServerError
}

// CodeForStatus is the code an HTTP status stands for, internal for a
// status outside the table.
func CodeForStatus(status int) Code {
	for _, row := range codeTable {
		if row.status == status {
			return row.code
		}
	}
	return CodeInternal
}

// Sentinel returns the code's sentinel error, ErrInternal for an unknown
// code.
func (c Code) Sentinel() *Error {
	for _, row := range codeTable {
		if row.code == c {
			return row.sentinel
		}
	}
	return ErrInternal
}

// Error is a refusal by the management API.
type Error struct {
	Code    Code
	Message string
	// Diagnostics are set for CodeConfigInvalid: every reason a
	// configuration was refused.
	Diagnostics []Diagnostic
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is matches by code, so errors.Is(err, ErrNotFound) holds for every
// not-found refusal whatever its message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf builds an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf is the code of err: the code of the *Error it wraps, CodeInternal
// for anything else.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) && e.Code.Valid() {
		return e.Code
	}
	return CodeInternal
}

// errorBody is the JSON body of a refusal.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code        Code         `json:"code"`
	Message     string       `json:"message"`
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
}

// ErrorBody is the wire form of err, as the API writes it.
func ErrorBody(err *Error) any {
	return errorBody{Error: errorDetail{Code: err.Code, Message: err.Message, Diagnostics: err.Diagnostics}}
}
