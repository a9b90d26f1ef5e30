package host_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// TestFaultWaitProgressIsClippedAsTheRuntimeClips: a Wait's progress is
// one line the operator reads (GET /v1/work, the CLI), so a hostile
// extension's control characters (a terminal's escape sequences), a
// Unicode line separator and its excess are dropped exactly as
// runtime.ClipLine drops them for an in-process caller; and an honest
// progress whose 120th byte falls inside a character is clipped before
// that character, not refused as invalid UTF-8.
func TestFaultWaitProgressIsClippedAsTheRuntimeClips(t *testing.T) {
	bothWays(t, func(t *testing.T, c *serviceCase) {
		ctx := ctxT(t)
		progress := func() string {
			t.Helper()
			var p string
			require.NoError(t, c.store.View(ctx, func(tx runtime.ReadTx) error {
				w, err := tx.ActiveWait(c.ownKindWork)
				p = w.Progress
				return err
			}))
			return p
		}
		for _, tc := range []struct{ name, sent, want string }{
			{"escapes", "\x1b[2J\x1b[31mhalf\x07 way\x1b[0m", "[2J[31mhalf way[0m"},
			{"line_separator", "first\u2028second", "first"},
			{"split_character", strings.Repeat("a", 119) + "é and more", strings.Repeat("a", 119)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				require.NoError(t, c.mine.Call(ctx, "wait.progress", protocol.WaitProgressParams{WorkID: c.ownKindWork, Progress: tc.sent}, nil))
				assert.Equal(t, tc.want, progress())
				assert.Equal(t, runtime.ClipLine(tc.sent, runtime.MaxWaitProgress), progress())
			})
		}
	})
}
