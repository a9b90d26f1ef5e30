package certify

import (
	"context"
	"fmt"
)

// Suites runs the shared conformance suites against a package over the
// wire, one method per criterion that needs the running package. The host
// wiring implements it from the conformance package's CheckX cores; certify
// holds no copy of their logic. Each method returns nil when the package
// passes, the joined failures otherwise, and an error wrapping ErrHarness
// when the suite itself could not run.
//
// An implementation that wires only some suites embeds NotWired for the
// rest, which end as harness_error.
type Suites interface {
	Handshake(ctx context.Context, t *Target) error
	VersionMismatch(ctx context.Context, t *Target) error
	ManifestMatch(ctx context.Context, t *Target) error
	StdoutHygiene(ctx context.Context, t *Target) error
	Shutdown(ctx context.Context, t *Target) error
	StdinEOF(ctx context.Context, t *Target) error
	CrashRestart(ctx context.Context, t *Target) error
	KVScoping(ctx context.Context, t *Target) error
	KVAtomicity(ctx context.Context, t *Target) error
	EmissionsAtomic(ctx context.Context, t *Target) error
	EmissionsIdempotent(ctx context.Context, t *Target) error
	RoutesPure(ctx context.Context, t *Target) error
	RoutesDisplay(ctx context.Context, t *Target) error
	RouteSamples(ctx context.Context, t *Target) error
	OperationsIdempotent(ctx context.Context, t *Target) error
	SchemasCurrent(ctx context.Context, t *Target) error
	ExecutorLifecycle(ctx context.Context, t *Target) error
	ExecutorControls(ctx context.Context, t *Target) error
	InTransactionDeadline(ctx context.Context, t *Target) error
	Cancellation(ctx context.Context, t *Target) error
}

// NotWired is the Suites of a runner with no conformance suites wired: every
// method returns ErrNotWired, so its criteria end as harness_error and never
// as pass.
type NotWired struct{}

var _ Suites = NotWired{}

func notWired(suite string) error {
	return &harnessError{err: fmt.Errorf("the %s suite is not wired into certify yet", suite), notWired: true}
}

func (NotWired) Handshake(context.Context, *Target) error       { return notWired("handshake") }
func (NotWired) VersionMismatch(context.Context, *Target) error { return notWired("version-mismatch") }
func (NotWired) ManifestMatch(context.Context, *Target) error   { return notWired("manifest-match") }
func (NotWired) StdoutHygiene(context.Context, *Target) error   { return notWired("stdout-hygiene") }
func (NotWired) Shutdown(context.Context, *Target) error        { return notWired("shutdown") }
func (NotWired) StdinEOF(context.Context, *Target) error        { return notWired("stdin-EOF") }
func (NotWired) CrashRestart(context.Context, *Target) error    { return notWired("crash-restart") }
func (NotWired) KVScoping(context.Context, *Target) error       { return notWired("KV scoping") }
func (NotWired) KVAtomicity(context.Context, *Target) error     { return notWired("KV atomicity") }
func (NotWired) EmissionsAtomic(context.Context, *Target) error { return notWired("emissions") }
func (NotWired) EmissionsIdempotent(context.Context, *Target) error {
	return notWired("emissions")
}
func (NotWired) RoutesPure(context.Context, *Target) error    { return notWired("route purity") }
func (NotWired) RoutesDisplay(context.Context, *Target) error { return notWired("route display") }
func (NotWired) RouteSamples(context.Context, *Target) error  { return notWired("route samples") }
func (NotWired) OperationsIdempotent(context.Context, *Target) error {
	return notWired("operation idempotence")
}
func (NotWired) SchemasCurrent(context.Context, *Target) error    { return notWired("payload schema") }
func (NotWired) ExecutorLifecycle(context.Context, *Target) error { return notWired("executor") }
func (NotWired) ExecutorControls(context.Context, *Target) error {
	return notWired("executor controls")
}
func (NotWired) InTransactionDeadline(context.Context, *Target) error {
	return notWired("in-transaction deadline")
}
func (NotWired) Cancellation(context.Context, *Target) error { return notWired("cancellation") }
