// Package extensiontest is the harness extension authors import to test a
// package in their own repository, with go test, against the real daemon.
//
//	func TestGreeter(t *testing.T) {
//		extensiontest.Test(t, extensiontest.Case{Package: ".", Steps: []extensiontest.Step{{
//			Name:    "a signed webhook becomes work",
//			Webhook: &extensiontest.Webhook{Path: "/greeter/test/greeter", JSON: body, Sign: sig},
//			Expect:  []extensiontest.Check{extensiontest.ExpectWork(extensiontest.WorkMatch{State: "done"})},
//		}}})
//	}
//
// It owns the case: one `open-conduit serve` with its own short config and
// state directories and a manual clock (--test-clock), the package under
// test installed (a Go main package built as its manifest's command), the
// scripted agent installed beside it, and a configuration generated from
// the manifests (Generate: one scope, an entry of each extension type, a
// route for each handler, a binding to the agent granting every
// operation). Each step acts (apply or refuse a configuration, give the
// agent a script, deliver a signed webhook, reconcile, kill the package,
// restart or crash the daemon, update the package to a new release, move
// the clock) and then checks (events, work, waits, KV, doctor, nothing
// else happened), waiting on the daemon's change stream with a deadline,
// never a sleep.
//
// The daemon is real: $OPEN_CONDUIT_BIN when set, otherwise
// cmd/open-conduit built from the open-conduit module the test's module
// pins (`go list -m`: a version in the module cache, or the directory a
// replace names), once per test binary, cached under
// os.UserCacheDir()/open-conduit/extensiontest by version (a directory: by
// its path and a digest of its sources), under a file lock so test
// binaries that start at once build it once. When neither works the test
// fails saying how to fix it; it never skips.
//
// A failure names the step's number and name first, then what was
// expected and what was found, then the evidence: the step's transcript
// (its actions and the changes they brought), the scripted agent's
// transcript, the step's wire transcript (the JSON-RPC lines between the
// daemon and the package under test, and any other package whose wire
// moved, during that step only: serve runs with --test-wire-log, and a
// step notes each wire log's size when it starts), and the tails of the
// daemon's log and the package's stderr.
// The work directory is then kept and its path printed; OPEN_CONDUIT_KEEP=1
// keeps it always.
//
// Certify runs `open-conduit extension certify` on the package and
// reports each criterion as a subtest, so one go test gives both.
//
// The package drives the daemon through client only: it imports client,
// protocol and protocol/sdk, never host or internal packages.
package extensiontest
