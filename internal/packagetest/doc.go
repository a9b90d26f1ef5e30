// Package packagetest drives a Go extension package in process for the
// conformance package checks: a conformance.PackageDriver whose supervised
// instance is the extension attached to the real host service (sdk.Attach
// and host.Attach, no JSON) on an SQLite store, and whose spare instances
// are the extension served by sdk.ServeConn over in-memory pipes. It is
// test support for extension packages; the process-backed driver is
// certify's HostLaunch.
package packagetest
