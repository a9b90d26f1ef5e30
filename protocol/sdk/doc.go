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
// How requests are served: a request whose handler may call the host (a
// Func: operations, tasks, executors, ingress, webhooks …) runs in a
// goroutine of its own, so it may block, call back and wait on its context
// freely; it sees $/cancel and counts towards the bound of
// protocol.MaxInflight requests in flight. A request for a PureFunc
// (routes, validate, the in-transaction methods) starts on the
// connection's reader, which spares a goroutine and a wake-up; if it
// blocks or runs longer than jsonrpc.DefaultEagerDeadline it is handed to
// a goroutine there and then (jsonrpc.Options.Eager), so it sees $/cancel
// too and holds the stream up for no more than the deadline, which Go's
// timers honour to about a millisecond in an idle process. There is no
// unbounded inline mode.
//
// The wire itself, for authors in other languages, is documented by the
// transcripts in testdata/transcripts: each file shows what the host sends
// and what an extension answers, line by line.
//
// The package imports the standard library and protocol/... only, exactly
// as a third-party extension would.
package sdk
