package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/prototypes/transport/workload/overjsonrpc"
)

// The semantic checks pass the project's transport and fail each weakened
// build of it, naming the check that caught it: a check that passes a
// broken peer is broken.
func TestChecksCatchWeakenedTransports(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ext-jsonrpc")
	build := exec.Command("go", "build", "-o", bin, "./cmd/ext-jsonrpc")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	tr := &transport{name: "jsonrpc", binary: bin, start: startJSONRPC}

	t.Run("intact", func(t *testing.T) {
		assert.Empty(t, runChecks(context.Background(), tr))
	})
	for name, check := range overjsonrpc.Weakenings {
		t.Run(name, func(t *testing.T) {
			t.Setenv(overjsonrpc.WeakenEnv, name)
			failed := runChecks(context.Background(), tr)
			assert.Contains(t, failed, check, "the checks passed a peer with %s", name)
		})
	}
}
