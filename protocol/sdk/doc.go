// Package sdk is the Go SDK for Open Conduit extensions: what an author
// imports to write an extension that the host runs as a separate process
// speaking the protocol over stdin and stdout.
//
// It owns the extension side of the protocol: the lifecycle (initialize
// with version negotiation, configure with KV layout migration, shutdown),
// the dispatch of host calls to the author's handlers, checked against the
// manifest so a surface the manifest does not declare is refused, payload
// upcasting so handlers only see current payloads, and the Host client of
// the host's services (KV with a retrying transaction helper, state reads,
// Events, timers, artifacts, secrets, wait progress, ingress delivery),
// plus helpers that make an operation's effect happen once per request id.
//
// An extension is an Extension value. Serve serves it as a process;
// ServeConn serves it over any pair of streams; Attach serves it in the
// host's own process with no JSON at all. All three share one dispatch, so
// an extension behaves the same either way.
//
//	//go:embed open-conduit-extension.json
//	var manifest []byte
//
//	func main() {
//		err := sdk.Serve(&sdk.Extension{
//			Manifest: manifest,
//			Routes: map[string]sdk.Route{"notes": {Match: match}},
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//	}
//
// How requests are served: every request counts towards the bound of
// protocol.MaxInflight requests in flight (over it the host gets
// overloaded) and crosses its errors the same way. Most run in a
// goroutine of their own, so they may block, call back and wait on their
// context freely, and see $/cancel: configure, tasks, checks, executors,
// ingress. Those that usually answer at once start on the connection's
// reader, which spares a goroutine and a wake-up (jsonrpc.Options.Eager):
// the PureFuncs (routes, validate, the in-transaction methods), a
// Handler's operation.call and webhook.handle. One of those that calls
// the host, or asks for its context's Done, hands the reading to a new
// goroutine there and then; one that blocks or runs long otherwise is
// handed on at jsonrpc.DefaultEagerDeadline, which Go's timers honour to
// about a millisecond in an idle process, so it holds the stream up for
// no longer and sees $/cancel too.
//
// An Operation with Pure instead of Handler declares that it answers from
// the call alone and will not block; it gets no Host and no context. Its calls are
// served Inline (jsonrpc.Options.Inline): the reader runs it as it reads
// the call and writes the answer before it reads on, with no goroutine,
// no deadline timer and no request context, the cheapest way the SDK
// answers anything. The reader decides from the params' operation member
// (protocol.OperationCallName), so only a call that names a Pure operation
// plainly is served so; anything else is served as a Handler's would be.
// The declaration is the author's promise: a Pure function that blocks
// or runs long holds up every message behind it, a $/cancel included,
// for as long as it runs.
//
// The wire itself, for authors in other languages, is documented by the
// transcripts in testdata/transcripts: each file shows what the host sends
// and what an extension answers, line by line.
//
// The package imports the standard library and protocol/... only, exactly
// as a third-party extension would.
package sdk
