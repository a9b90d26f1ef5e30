// Package host is the extension host: it turns a directory holding an
// open-conduit-extension.json into a running, supervised, scoped extension.
//
// It owns
//   - discovery of installed and bundled packages (Discover, DiscoverAll)
//     and the atomic conflict check over the set (CheckConflicts);
//   - the supervised process (Process): a sanitised environment, its own
//     process group, a bounded stderr log, the initialize and configure
//     handshake, restarts with backoff after a crash, and a bounded close;
//   - the extension-to-host service (Service), bound to the identity the
//     host started the extension with and never to anything it sends;
//   - bounded in-transaction calls (CallInTx), which refuse every callback
//     while one is outstanding.
//
// The package imports protocol, protocol/jsonrpc and runtime. It never
// imports a store implementation: the composition root hands it a
// runtime.Store.
package host
