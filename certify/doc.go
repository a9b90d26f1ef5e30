// Wiring API (for the command and for tests that certify real packages):
//
//	func NewCommand(executable string) Command // Command{Launch: HostLaunch(executable)}
//	func HostLaunch(executable string) LaunchFunc
//	const TestScope = "certify"
//	var ErrNotApplicable // a suite found nothing to check: the criterion ends as skip
//
// executable is the open-conduit binary that runs packages whose command is
// protocol.HostRunCommand ("" for os.Executable()).

// Package certify is the certification runner behind
// `open-conduit extension certify DIR`: it owns the versioned criteria an
// extension package is certified against, decides which of them apply from
// what the package's manifest declares, runs each one under a deadline, and
// reports the results to people (a progress line per criterion and a
// summary) and to CI (JSON, JUnit XML, a wire transcript).
//
// A criterion is data: a stable hierarchical ID ("lifecycle/handshake"), a
// title, what it checks, the spec section it enforces, an applicability
// rule over the manifest and its Check, one of the shared conformance
// package checks (conformance.CheckPackageX), so adding a criterion is one
// registry entry; certify never holds a second copy of their logic. Only
// manifest/valid has a Run instead, which the runner decides itself. A
// criterion with no check, or a launcher that gives no conformance driver,
// ends as harness_error, never as pass.
//
// Every criterion ends in exactly one Status: pass, fail, skip (it does not
// apply to what the manifest declares, or the package gave it nothing to
// check; the reason is reported), harness_error (the runner itself broke;
// never blamed on the package) or not_run (the manifest did not load, so
// only manifest/valid ran; the cause is printed first, with the hint to
// run `open-conduit extension validate DIR`). A criterion never passes on
// what it did not observe: one whose every call the package refused fails
// with "could not exercise: …", naming the inputs it tried. A criterion
// that outlives its deadline fails with "criterion ID timed out after D"
// and the run goes on; one that ignores its context is abandoned after a
// grace period. A package that crashes or hangs fails the criterion it was
// running and is restarted for the next one. A failure's evidence is the
// wire around the message it names (conformance.WireIndex: the stray
// line, the write made again), or else the last messages of the
// criterion, and the tail of the package's stderr.
//
// Coverage, stated: after the criteria, the runner reads the wire and lists
// as uncovered every host-to-extension surface the manifest declares (per
// declared name for tasks, checks, routes, operations, recurrences,
// triggers, executors, ingress types and validate's types) that no
// criterion of the run had the package answer with a result, with the
// reason (unjudged names the surfaces no criterion of this version calls).
// Text, JSON and JUnit (a skipped case of type uncovered) list them and
// the summary counts them; they never fail the run.
//
// Inputs: the criteria call the package with the inputs its author gives
// in certify/inputs.json (conformance.Inputs; a bad file is a usage
// error naming its JSON path), and otherwise with inputs built from the
// manifest's schemas (conformance.SchemaInput).
//
// Reports: --json, --junit and --trace name files (or - for standard
// output, which then holds that report alone while progress goes to
// standard error), checked before the run starts. --trace streams: each
// wire message is written as it is recorded, so a killed run keeps its
// transcript up to then.
//
// A baseline lists criteria the package is known to fail: a listed failure
// does not fail the run, an unlisted one does, and a listed criterion that
// no longer fails (it passes, or no longer applies) makes the run fail as a
// stale baseline. A listed criterion that ends as harness_error still fails
// the run: a baseline excuses the package, never the runner. An entry that
// names no criterion is a usage error. In JUnit XML a known failure reads
// as skipped (type known_failure) and a stale entry as a failure (type
// stale_baseline), so JUnit's failures and errors are what fails the run.
//
// Selection: --run REGEXP runs only the criteria whose ID it matches
// (anywhere in the ID, as with go test -run; anchor it with ^). The
// others are left out of the report entirely (they are neither passed nor
// skipped), the report records the pattern, and a pattern that selects no
// criterion is a usage error, so a typo cannot pass a CI job.
//
// Exit status of Main: 0 when every selected criterion that applies passed
// (after the baseline), 1 when one failed or a baseline entry is stale, 2
// for a usage error, 3 when nothing failed but the harness broke.
//
// Wiring: the runner reaches a package only through a LaunchFunc (which
// makes a Package: the supervised process, its wire transcript and stderr
// tail). HostLaunch wires it to the real host: the package runs under
// host.Process with a host.Service on an SQLite store in the run's
// temporary state directory, a wire tap records every line, and the
// Package is the conformance.PackageDriver each criterion's Check runs
// against (NewCommand for the command line). Without a launcher the runner
// still checks manifest/valid and reports every other criterion that
// applies as harness_error. A check that finds nothing to check in what
// the package offers returns ErrNotApplicable and its criterion ends as
// skip, with the reason.
//
// Run is the library entry point; Main only parses flags around it.
package certify
