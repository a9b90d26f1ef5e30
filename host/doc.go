// Package host is the extension host: it turns a directory holding an
// open-conduit-extension.json into a running, supervised, scoped extension
// that the runtime drives through its own contracts.
//
// It owns
//   - discovery of installed and bundled packages (Discover, DiscoverAll,
//     BundledRoot) and the atomic conflict check over the whole set
//     (CheckConflicts);
//   - the supervised process (Process): the command run in the package
//     directory in its own process group, a sanitised environment
//     (Environment), stderr to a bounded log (LogPath), a private state
//     directory (StateDir), the initialize and configure handshake with
//     its deterministic refusals (ErrRefused, never restarted) and nothing
//     served before it (every call the process makes before its initialize
//     answer has been checked is refused unauthorized), restarts
//     with exponential backoff after a crash on an injectable Clock, and a
//     bounded Close (shutdown, end of stdin, SIGTERM, SIGKILL to the group,
//     reaping, a detached descendant reported);
//   - the extension-to-host service (Service), bound to the identity the
//     host started the extension with and never to anything it sends: KV in
//     its own namespaces, kv.commit emissions, state reads limited to its
//     scopes and its own Work kinds, event.accept, timers, secrets,
//     artifacts, ingress.deliver, wait.progress and work.cancel, with every
//     runtime error mapped onto a protocol code in one table; an Event it
//     hands the host may name (works) only Work those state reads see, any
//     other answering as a Work that does not exist;
//   - bounded in-transaction calls (Process.CallInTx): a hard deadline, and
//     every callback refused with reentrant_call while one is outstanding;
//   - the adapters (Remote) that present a running package through the
//     runtime's contracts (route handler, ingress source, operations with
//     emit.commit and dependency.filter, executor with every optional control
//     and recovery across restarts, recurrence, Work kind policy, task,
//     check), applying the payload schema gate before each decision;
//   - in-process attachment (Attach) of an extension served by protocol/sdk's
//     Attach, so every suite runs in process and over the wire.
//
// The package imports protocol, protocol/jsonrpc and runtime. It never imports a store implementation: the composition
// root hands it a runtime.Store.
package host
