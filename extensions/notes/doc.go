// Package notes is an example Open Conduit extension written with the Go
// SDK exactly as a third party would write one: it imports protocol/...
// only and runs as its own process (cmd/notes, or the host's
// "open-conduit extension-run notes").
//
// It owns a small note-keeping integration that exercises every surface an
// ingress extension has:
//
//   - an ingress type, notes, whose entries each read a note store (a
//     directory of JSON note files): webhook deliveries are pushed
//     (ingress.push) and the store is reconciled page by page
//     (ingress.reconcile); an entry that names a notes-webhook connection
//     also serves a signed webhook (webhook.handle) at
//     /notes/<scope>/<entry>, verified with an HMAC-SHA256 of the body
//     under the connection's secret, which it obtains through
//     secret.resolve; an entry that names an inbox_dir also runs a
//     receiver of its own (inbox.go), which reads that spool directory
//     on a poll, delivers each <delivery-id>.json file with
//     ingress.deliver on the source notes/<scope>/<entry>/inbox, and
//     removes the file only once the host answered that it is accepted;
//   - a route handler, notes, that decides from the Event alone and gives
//     the Work a display (title, ref and an http or https link), with
//     sample Events dated by the host's clock;
//   - three toolbelt operations: notes.add (a handler keyed by the call's
//     request ID, so a retry adds nothing), notes.await (a wait with a
//     description) and notes.publish (an emission whose record commits in
//     the emission's own transaction);
//   - a daily digest recurrence, a task that arms its timers from the
//     host's clock, and a doctor check of the note stores;
//   - three releases of the payload schema notes.note (Release 1, 2 and
//     3) with upcasters, and a KV layout migration from kv_version 0 to 2
//     in release 3.
//
// Extension returns the current release, 3, whose manifest is the
// directory's open-conduit-extension.json.
package notes
