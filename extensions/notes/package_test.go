package notes_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/internal/packagetest"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// TestPackageChecksInProcess runs the conformance package checks that
// mean something in process against notes attached to the real host:
// handshake, version refusal, manifest, shutdown, cancellation, stdin
// EOF of a spare, and the surfaces' checks.
func TestPackageChecksInProcess(t *testing.T) {
	packagetest.RunInProcess(t, ".", notes.Extension)
}

// TestPackageChecksAsProcess runs every package check against notes as a
// subprocess under the real host (certify's host-backed driver), this
// test binary serving it as open-conduit extension-run notes would.
func TestPackageChecksAsProcess(t *testing.T) {
	packagetest.RunAsProcess(t, ".", "")
}

// TestInProcessPackageChecksCatchWeakenedNotes: the in-process driver
// records the instance's calls to the host, so the checks that judge them
// fail a notes whose add forgets the request ID (its effect made again)
// and one whose add peeks into another extension's namespace.
func TestInProcessPackageChecksCatchWeakenedNotes(t *testing.T) {
	forgetful := func() *sdk.Extension {
		return weakened(func(ext *sdk.Extension) {
			op := ext.Operations[notes.OpAdd]
			inner := op.Handler
			op.Handler = func(ctx context.Context, h *sdk.Host, p protocol.OperationCallParams) (protocol.OperationCallResult, error) {
				p.RequestID = ""
				return inner(ctx, h, p)
			}
			ext.Operations[notes.OpAdd] = op
		})
	}
	nosy := func() *sdk.Extension {
		return weakened(func(ext *sdk.Extension) {
			op := ext.Operations[notes.OpAdd]
			inner := op.Handler
			op.Handler = func(ctx context.Context, h *sdk.Host, p protocol.OperationCallParams) (protocol.OperationCallResult, error) {
				_, _ = h.Get(ctx, "runner", "runs") // refused by the host, and still a failure
				return inner(ctx, h, p)
			}
			ext.Operations[notes.OpAdd] = op
		})
	}
	for _, tc := range []struct {
		name  string
		ext   func() *sdk.Extension
		check func(context.Context, conformance.PackageDriver) error
		want  string
	}{
		{"forgetful add", forgetful, conformance.CheckPackageOperationsIdempotent, "made its effect again"},
		{"nosy add", nosy, conformance.CheckPackageKVScoping, `namespace "runner"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := packagetest.Start(testContext(t), packagetest.Config{Dir: ".", New: tc.ext, StateDir: t.TempDir()})
			require.NoError(t, err)
			t.Cleanup(func() { d.Close() })
			err = tc.check(testContext(t), d)
			require.Error(t, err, "the check passed a weakened notes")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
