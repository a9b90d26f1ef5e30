// Package scenarios drives the built open-conduit binary through txtar
// scripts (testscript), as a CI job would: TestMain builds
// ./cmd/open-conduit once with go build and puts it first on PATH, so the
// bundled extensions run on the same binary the scripts call.
//
// The scenarios in testdata cover:
//   - certify-notes, certify-runner, certify-pynotes: certifying a good
//     package (the bundled notes and runner, the Python example) passes
//     every criterion that applies, exits 0, prints a line per criterion
//     and a summary, and writes the --json report;
//   - weak-*: certifying each negative control under
//     testdata/extensions exits 1 and fails exactly the criterion it is
//     built to fail, named on stdout and in the JSON report, with no
//     harness error;
//   - list: --list, alone and with --run, and a pattern that selects
//     nothing (exit 2);
//   - run: --run selecting one criterion, a typo in it, and --keep;
//   - baseline: --baseline with a known failure (exit 0), a stale entry
//     (exit 1) and an entry naming no criterion;
//   - junit: the --junit XML and the --trace transcript;
//   - validate: extension validate of a bad manifest, and certify failing
//     it on manifest/valid.
//
// Besides testscript's own commands the scripts use (cmds_test.go):
//
//	count FILE STATUS N   exactly N criteria of the JSON report FILE ended as STATUS
//	status FILE ID STATUS criterion ID of the JSON report FILE ended as STATUS
//
// The scripts see $EXT (testdata/extensions of the module), $NOTES and
// $RUNNER (the bundled packages). Scripts for Python packages skip when
// python3 is not installed; when it is, the interpreter is linked next to
// the binary so a version-manager shim does not slow every start. The test
// stats the module's sources, so go test's cache reruns the scenarios
// after any change to the binary or the packages.
//
// The fault drills, testdata/drills/*.txtar, are embedded (Drills) and
// run by TestDrills through package drill, whose commands (daemon, await,
// expect, webhook, ext kill, fault …) its doc.go lists; TestSoak runs 20
// rounds of the kill -9 soak. go test ./scenarios -run TestDrills/<name>
// replays one, as `open-conduit drill run <name>` does from the binary.
//
// Run them all with
//
//	go test ./scenarios
//
// or one with
//
//	go test ./scenarios -run TestScenarios/<name>
//
// where <name> is the script's file name without .txtar (for example
// TestScenarios/weak-unscoped-kv).
package scenarios
