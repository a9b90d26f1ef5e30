// Package packages owns the install tree, <config>/extensions: staging a
// package from a directory or a .tar.gz (Unpack and CopyTree refuse
// absolute paths, "..", links out of the package, hard links, devices and
// oversize packages), validating it offline, checking its names against
// every installed and bundled package (host.CheckConflicts), and
// committing it with a journaled rename so that a crash at any moment
// leaves the old release or the new one, never a mix or nothing: the next
// Open (every packaging command) or Recover (the daemon, before
// discovery) finishes a change the ledger recorded and undoes one it did
// not.
//
// The tree's own entries are hidden from discovery:
//
//	<config>/extensions/<name>/            the installed release
//	<config>/extensions/.previous/<name>/  the release before it, for rollback
//	<config>/extensions/.staging/          packages being staged, the journal of a change under way
//	<config>/extensions/.ledger.json       the install history (Ledger)
//	<config>/extensions/.lock              one packaging command at a time
//
// Describe puts a manifest in words for consent and inspect. The KV
// layout check (no kv_version below the recorded layout) is the caller's,
// which knows where the layout is recorded (the daemon's store): see
// CheckKV.
package packages
