package sdk_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// An extension served with EXTENSION_CPUPROFILE=PREFIX writes a CPU
// profile to PREFIX.<pid> by the time it exits; without the variable it
// writes none.
func TestServeWritesTheCPUProfileAsked(t *testing.T) {
	for _, asked := range []bool{true, false} {
		t.Run(fmt.Sprint("asked=", asked), func(t *testing.T) {
			ctx := testContext(t)
			prefix := filepath.Join(t.TempDir(), "ext.prof")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), sdkChildEnv+"=demo")
			if asked {
				cmd.Env = append(cmd.Env, sdk.CPUProfileEnv+"="+prefix)
			}
			p, err := sdktest.Start(cmd, sdktest.New())
			require.NoError(t, err)
			require.NoError(t, p.Conn.Call(ctx, "initialize", initParams, nil))
			require.NoError(t, p.Conn.Call(ctx, "shutdown", nil, nil))
			p.Conn.Close()
			require.NoError(t, p.Err())

			written, err := filepath.Glob(prefix + ".*")
			require.NoError(t, err)
			if !asked {
				assert.Empty(t, written, "no profile unless asked")
				return
			}
			require.Equal(t, []string{fmt.Sprintf("%s.%d", prefix, cmd.Process.Pid)}, written)
			info, err := os.Stat(written[0])
			require.NoError(t, err)
			assert.Positive(t, info.Size(), "the profile was stopped and flushed before exit")
		})
	}
}
