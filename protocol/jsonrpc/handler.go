package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Request is one request or notification received from the peer.
type Request struct {
	// Method is the method name.
	Method string
	// Params is the raw params value, nil when the message had none. It
	// is the handler's own copy, unless Options.ReuseParams is set.
	Params json.RawMessage
	// Notification is true when the peer expects no answer.
	Notification bool
	// ID is the request's id as it crossed (raw JSON, such as 7 or "a"),
	// nil for a notification; the response carries the same bytes. The
	// handler must not modify it.
	ID json.RawMessage
	// Seq numbers the requests (not notifications) the Conn hands its
	// Handler, from 1, in the order it read them. Handlers start in any
	// order; Seq tells one which requests came before it on the stream
	// (a shutdown must still serve those).
	Seq uint64

	buf *[]byte // Params' pooled memory
}

// DecodeParams unmarshals r.Params into v as json.Unmarshal does, with a
// fast path for big string members (base64 chunks) bound to []byte or
// string fields. Missing or null params leave v as it is. A failure wraps
// ErrInvalidParams, so a handler can return it as it is and the peer sees
// -32602. On the fast path a []byte field that already holds memory with
// room for its decoded chunk is decoded into that memory (the slice is
// resliced, its old bytes overwritten), so a caller can decode chunk after
// chunk into one buffer; a nil field gets new memory.
func (r *Request) DecodeParams(v any) error {
	if len(r.Params) == 0 || string(r.Params) == "null" {
		return nil
	}
	if err := unmarshal(r.Params, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidParams, r.Method, err)
	}
	return nil
}

// Handler serves the requests and notifications a Conn receives. Each call
// runs in its own goroutine (but those Options.Inline names, which run
// on the reader and must neither block nor call back), so Handle may block
// and may call back through
// ConnFromContext(ctx); ctx is cancelled when the peer sends $/cancel for
// the request or the connection ends. For a notification the result and
// error are discarded.
type Handler interface {
	Handle(ctx context.Context, req *Request) (result any, err error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) (any, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, req *Request) (any, error) { return f(ctx, req) }

var _ Handler = HandlerFunc(nil)

// Methods is a Handler that dispatches on the method name. A method it does
// not hold is answered with -32601 (ErrMethodNotFound).
type Methods map[string]HandlerFunc

// Handle dispatches req to the function registered under req.Method.
func (m Methods) Handle(ctx context.Context, req *Request) (any, error) {
	if f, ok := m[req.Method]; ok {
		return f(ctx, req)
	}
	return nil, fmt.Errorf("%w: %s", ErrMethodNotFound, strconv.Quote(req.Method))
}

var _ Handler = Methods(nil)

var (
	// ErrTransport is wrapped by every error a call returns because the
	// stream broke: end of input, a write failure, a protocol error or
	// Close. Such an error never carries an answer from the peer.
	ErrTransport = errors.New("jsonrpc: transport failure")

	// ErrProtocol is wrapped, together with ErrTransport, when the peer
	// sent a line that was too long, not JSON or not a JSON-RPC message.
	ErrProtocol = errors.New("jsonrpc: protocol error")

	// ErrInvalidParams, returned (wrapped) by a handler, answers -32602
	// with the error's text as the message.
	ErrInvalidParams = errors.New("invalid params")

	// ErrTooLarge is wrapped by the error Call or Notify returns when the
	// message would exceed Options.MaxMessageBytes. Nothing is sent, and
	// the connection stays up. A result over the bound is answered as an
	// internal error.
	ErrTooLarge = errors.New("jsonrpc: message too large")

	// ErrMethodNotFound, returned (wrapped) by a handler, answers -32601
	// with the error's text as the message.
	ErrMethodNotFound = errors.New("method not found")

	// ErrInvalidResponse is wrapped by the error Call returns when the
	// peer's response breaks the strict JSON rule (see the package doc):
	// the response is dropped unread and the connection stays up.
	ErrInvalidResponse = errors.New("jsonrpc: invalid response")
)

// AuthoredError is an error whose code and message a handler means the
// peer to see. The first AuthoredError in a handler's error chain crosses
// the wire as {"code": WireNumber(), "message": message, "data": data},
// message and data being what WireData returns. Any other error crosses
// as -32603 "internal error", its detail kept on this side (Options.Logf).
type AuthoredError interface {
	error
	WireNumber() int
	WireData() (message string, data any)
}

// Error is an error response received from the peer, returned by Call
// when Options.DecodeError is nil or returns nil.
type Error struct {
	Code    int
	Message string
	// Data is the raw data member, nil when absent.
	Data json.RawMessage
}

func (e *Error) Error() string {
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

// WireNumber and WireData make an *Error an AuthoredError, so a handler
// that returns a peer's error passes it on unchanged.
func (e *Error) WireNumber() int { return e.Code }

// WireData returns the message and data the error arrived with.
func (e *Error) WireData() (string, any) {
	if len(e.Data) == 0 {
		return e.Message, nil
	}
	return e.Message, e.Data
}

var _ AuthoredError = (*Error)(nil)
