// Package protocol is the wire contract between the Open Conduit host and
// its extensions: protocol versions and their negotiation, the strict
// manifest open-conduit-extension.json and its validation, the method
// catalogue, the error codes and their sentinel errors, the wire types,
// namespaces, payload schema evolution and the protocol's limits.
//
// It imports the standard library only, so an extension written in Go
// depends on nothing the host does. Authors in other languages read the
// same contract in docs/protocol.md, which is generated from this package.
package protocol
