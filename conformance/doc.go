// Package conformance holds the shared suites that the transport, the
// runtime, the host and extensions must each pass, in process and over the
// wire. A suite is a function over a driver, in the manner of
// testing/fstest.TestFS: a CheckX core that returns every failure joined
// into one error, so the certify runner can use it without package testing,
// and a RunX wrapper that turns each check into a named subtest.
//
// The package checks (CheckPackageX over a PackageDriver) drive a whole
// extension package over the wire, as certification does: a supervised
// process, spare processes spoken to directly, and the recorded wire they
// judge from. The driver that runs a package under the real host lives in
// certify; this package never imports the host or a store.
//
// Each suite comes with a negative control, a deliberately weakened target
// that it must fail; the tests assert that it does.
package conformance
