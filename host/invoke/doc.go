// Package invoke runs an extension package for exactly one call without a
// daemon: `open-conduit extension invoke` and the Go API beside it
// (Invoke). It owns the one-shot supervisor: the launch, the four-request
// exchange (initialize, an empty configure, the call, shutdown), the hard
// limits (Limits), the fixed failure codes (Code, one sentinel each) and
// the cleanup.
//
// The process starts with the request's environment and nothing else, in
// a fresh temporary working directory (its state and executor directories
// are temporary too), as the leader of a new session and process group,
// with no descriptor but its three pipes. Its stdin is written without
// blocking past the limits; stdout and stderr are read concurrently, in
// chunks of at most the stream's remaining allowance plus one byte, so the
// first excess byte ends the call; only stdout is kept (bounded by its
// limit), stderr is counted and discarded. Every line the extension
// writes is held to the strict JSON rule (one value, valid UTF-8, no
// escaped half of a surrogate pair, no duplicate member, finite numbers)
// and to the shape of a JSON-RPC 2.0 message; an answer must carry the id
// of the request it answers. Requests the extension sends the host are
// answered unsupported: a one-shot call serves no host method.
//
// Whatever happened, cleanup sends SIGKILL to the group, reaps the
// process and drains the pipes within the cleanup budget, and removes the
// temporary directory. A descendant that left the group and still holds
// the pipes is reported (Error.Detached), never claimed killed. A cleanup
// failure is reported even after another failure (Error.Cleanup).
//
// Diagnostics are the host's own fixed sentences: they never hold the
// params, environment values, the extension's output or messages, or a
// path. This is not a sandbox: the extension runs with the caller's
// permissions.
//
// The package imports protocol/* and the standard library only. It runs
// on Linux and macOS.
package invoke
