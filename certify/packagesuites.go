package certify

import (
	"context"
	"strings"

	"github.com/open-conduit/open-conduit/conformance"
)

// PackageSuites returns the Suites that run the conformance package checks
// (conformance.CheckPackageX) against the Package a HostLaunch LaunchFunc
// made, which is also their conformance.PackageDriver.
func PackageSuites() Suites { return packageSuites{} }

// NewCommand returns `extension certify` wired to the real host:
// HostLaunch(executable) and PackageSuites().
func NewCommand(executable string) Command {
	return Command{Suites: PackageSuites(), Launch: HostLaunch(executable)}
}

// ErrNotApplicable marks a suite that found nothing in what the package
// declares to check: the criterion ends as skip, with the reason.
var ErrNotApplicable = conformance.ErrNotApplicable

type packageSuites struct{}

var _ Suites = packageSuites{}

// run runs one package check against the target's package.
func run(ctx context.Context, t *Target, check func(context.Context, conformance.PackageDriver) error) error {
	p, err := t.Package(ctx)
	if err != nil {
		return err
	}
	d, ok := p.(conformance.PackageDriver)
	if !ok {
		return Harnessf("the package launcher gives no conformance driver (%T): use HostLaunch", p)
	}
	return check(ctx, d)
}

// skipReason is the reason of an ErrNotApplicable error.
func skipReason(err error) string {
	return strings.TrimPrefix(err.Error(), ErrNotApplicable.Error()+": ")
}

func (packageSuites) Handshake(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageHandshake)
}
func (packageSuites) VersionMismatch(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageVersionMismatch)
}
func (packageSuites) ManifestMatch(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageManifestMatch)
}
func (packageSuites) StdoutHygiene(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageStdoutHygiene)
}
func (packageSuites) Shutdown(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageShutdown)
}
func (packageSuites) StdinEOF(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageStdinEOF)
}
func (packageSuites) CrashRestart(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageCrashRestart)
}
func (packageSuites) KVScoping(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageKVScoping)
}
func (packageSuites) KVAtomicity(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageKVAtomicity)
}
func (packageSuites) EmissionsAtomic(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageEmissionsAtomic)
}
func (packageSuites) EmissionsIdempotent(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageEmissionsIdempotent)
}
func (packageSuites) RoutesPure(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageRoutesPure)
}
func (packageSuites) RoutesDisplay(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageRoutesDisplay)
}
func (packageSuites) RouteSamples(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageRouteSamples)
}
func (packageSuites) OperationsIdempotent(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageOperationsIdempotent)
}
func (packageSuites) ExecutorLifecycle(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageExecutorLifecycle)
}
func (packageSuites) ExecutorControls(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageExecutorControls)
}
func (packageSuites) Cancellation(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageCancellation)
}
func (packageSuites) SchemasCurrent(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageSchemasCurrent)
}

func (packageSuites) InTransactionDeadline(ctx context.Context, t *Target) error {
	return run(ctx, t, conformance.CheckPackageInTransactionDeadline)
}
