// Package jsonrpc is the transport of the extension protocol: symmetric
// JSON-RPC 2.0 over a pair of byte streams, one JSON object per line.
//
// It owns framing (a line of at most Options.MaxMessageBytes: a longer
// line or one that is not JSON closes the connection with a protocol
// error, and a message over the bound is refused before it is sent),
// request ids (an int64 counter per sender), matching responses
// that arrive in any order, notifications, cancellation with $/cancel
// {"id": N}, the bound on requests served at once (answered with
// overloaded, never by pausing the reader, since the reader also delivers
// the answers that handlers' nested calls wait for), and the mapping of
// handler errors onto the wire: an AuthoredError crosses with its own
// code, message and data; anything else as -32603 with no detail.
//
// Every message read is held to the strict JSON rule, in the same single
// pass that frames it: each string, member names included, is valid UTF-8
// once its escapes are read (no raw invalid byte, no unpaired surrogate
// escape, which encoding/json would quietly turn into U+FFFD), and each
// number fits a float64. A request that breaks it is answered -32602 with
// the JSON path of the offending value and its handler never runs; such a
// notification is dropped; such a response fails its call with
// ErrInvalidResponse; an id that breaks it is unreadable, so the message
// is an invalid request. The connection stays up but for the last. The
// Conn likewise refuses to send a message that breaks the rule.
//
// Both sides use the same Conn: NewConn starts the reader, Call and Notify
// send, and a Handler serves. A handler may call back on the Conn it finds
// with ConnFromContext. When the stream breaks, every pending and later
// Call fails with an error wrapping ErrTransport.
//
// The package imports the standard library only and knows nothing of the
// protocol's error codes; Options.DecodeError is where a caller maps them.
//
// An extension serving on its stdio moves os.Stdout aside first, so that
// stray prints cannot corrupt the stream:
//
//	out := os.Stdout
//	os.Stdout = os.Stderr
//	conn := jsonrpc.NewConn(os.Stdin, out, jsonrpc.Methods{
//		"echo": func(ctx context.Context, req *jsonrpc.Request) (any, error) {
//			return req.Params, nil
//		},
//	}, nil)
//	<-conn.Done() // the host closed stdin: exit
package jsonrpc
