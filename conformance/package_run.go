package conformance

import (
	"context"
	"errors"
	"testing"
)

// PackageCheck is one package check by name.
type PackageCheck struct {
	Name  string
	Check func(ctx context.Context, d PackageDriver) error
}

// PackageChecks lists every package check, in the order certification's
// criteria run them.
func PackageChecks() []PackageCheck {
	return []PackageCheck{
		{"cancellation", CheckPackageCancellation},
		{"checks", CheckPackageChecks},
		{"emissions_atomic", CheckPackageEmissionsAtomic},
		{"emissions_idempotent", CheckPackageEmissionsIdempotent},
		{"executor_controls", CheckPackageExecutorControls},
		{"executor_lifecycle", CheckPackageExecutorLifecycle},
		{"overloaded", CheckPackageOverloaded},
		{"ingress_scan", CheckPackageIngressScan},
		{"kv_atomicity", CheckPackageKVAtomicity},
		{"kv_scoping", CheckPackageKVScoping},
		{"crash_restart", CheckPackageCrashRestart},
		{"handshake", CheckPackageHandshake},
		{"manifest_match", CheckPackageManifestMatch},
		{"shutdown", CheckPackageShutdown},
		{"sigterm", CheckPackageSigterm},
		{"start_bound", CheckPackageStartBound},
		{"stdin_eof", CheckPackageStdinEOF},
		{"stdout_hygiene", CheckPackageStdoutHygiene},
		{"version_mismatch", CheckPackageVersionMismatch},
		{"operations_idempotent", CheckPackageOperationsIdempotent},
		{"permissions", CheckPackagePermissions},
		{"routes_display", CheckPackageRoutesDisplay},
		{"routes_pure", CheckPackageRoutesPure},
		{"route_samples", CheckPackageRouteSamples},
		{"schemas_current", CheckPackageSchemasCurrent},
		{"schemas_readable", CheckPackageSchemasReadable},
		{"tasks", CheckPackageTasks},
		{"in_transaction_deadline", CheckPackageInTransactionDeadline},
		{"validate", CheckPackageValidate},
		{"wait_progress", CheckPackageWaitProgress},
		{"initialize_first", CheckPackageInitializeFirst},
		{"malformed_input", CheckPackageMalformedInput},
		{"method_not_found", CheckPackageMethodNotFound},
		{"unauthored_internal", CheckPackageUnauthoredErrors},
	}
}

// RunPackage runs every package check as a named subtest; a check with
// nothing to check in what the package offers is skipped with its reason.
// Certification decides applicability from the manifest first; RunPackage
// runs every check and lets each find out.
func RunPackage(t *testing.T, d PackageDriver) {
	t.Helper()
	for _, c := range PackageChecks() {
		t.Run(c.Name, func(t *testing.T) {
			err := c.Check(t.Context(), d)
			switch {
			case errors.Is(err, ErrNotApplicable):
				t.Skip(err)
			case err != nil:
				t.Error(err)
			}
		})
	}
}
