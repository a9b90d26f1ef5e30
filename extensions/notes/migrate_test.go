package notes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// upgrade runs release 1 against host, adds n notes through it (KV
// layout 0), then starts release 3 against the same host and state
// directory without configuring it.
func upgrade(t *testing.T, m mode, host *sdktest.Host, stateDir string, n int) sdk.Caller {
	t.Helper()
	ctx := testContext(t)
	init := protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}, StateDir: stateDir}
	old := m.start(t, 1, host)
	require.NoError(t, old.Call(ctx, "initialize", init, nil))
	require.NoError(t, old.Call(ctx, "configure", configure(0, 0), nil))
	for i := range n {
		require.NoError(t, old.Call(ctx, "operation.call", protocol.OperationCallParams{Operation: notes.OpAdd,
			RequestID: fmt.Sprintf("req-%d", i), Input: json.RawMessage(fmt.Sprintf(`{"title":"note %d"}`, i)),
			Authority: protocol.Authority{ScopeID: "team"}}, nil))
	}
	require.NoError(t, old.Call(ctx, "shutdown", protocol.Empty{}, nil))

	c := m.start(t, 3, host)
	require.NoError(t, c.Call(ctx, "initialize", init, nil))
	return c
}

// layout reads the KV state the migration is about.
func layout(t *testing.T, host *sdktest.Host, ids []string) (legacy, indexed int, count json.RawMessage) {
	t.Helper()
	for _, id := range ids {
		if host.KV(notes.NamespaceLegacy, id) != nil {
			legacy++
		}
		if host.KV(notes.NamespaceIndex, "note/"+id) != nil {
			indexed++
		}
	}
	return legacy, indexed, host.KV(notes.NamespaceIndex, "count")
}

func TestKVMigration(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			host, stateDir := sdktest.New(), t.TempDir()
			c := upgrade(t, m, host, stateDir, 3)
			ids, err := notes.Store{Dir: stateDir + "/inbox"}.IDs()
			require.NoError(t, err)
			require.Len(t, ids, 3)
			legacy, indexed, _ := layout(t, host, ids)
			require.Equal(t, 3, legacy, "release 1 wrote layout 0")
			require.Zero(t, indexed)

			require.NoError(t, c.Call(ctx, "configure", configure(0, 2), nil))
			legacy, indexed, count := layout(t, host, ids)
			assert.Zero(t, legacy, "every record moved")
			assert.Equal(t, 3, indexed)
			assert.JSONEq(t, `{"notes":3}`, string(count))

			// The host records the new layout only after configure
			// succeeded; until then it asks again, and the migration
			// changes nothing the second time.
			before := host.Calls()
			require.NoError(t, c.Call(ctx, "configure", configure(0, 2), nil))
			for _, method := range host.Calls()[len(before):] {
				assert.NotEqual(t, "kv.commit", method, "an applied migration writes nothing")
			}
			legacy, indexed, count = layout(t, host, ids)
			assert.Equal(t, [2]int{0, 3}, [2]int{legacy, indexed})
			assert.JSONEq(t, `{"notes":3}`, string(count))

			// Release 3 adds in the new layout and keeps the count.
			require.NoError(t, c.Call(ctx, "operation.call", protocol.OperationCallParams{Operation: notes.OpAdd,
				RequestID: "req-new", Input: json.RawMessage(`{"title":"after"}`), Authority: protocol.Authority{ScopeID: "team"}}, nil))
			assert.JSONEq(t, `{"notes":4}`, string(host.KV(notes.NamespaceIndex, "count")))
		})
	}
}

// TestKVMigrationCrash cuts a migration short after its first batch, as a
// crash would, and checks that the next configure finishes it.
func TestKVMigrationCrash(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			host, stateDir := sdktest.New(), t.TempDir()
			c := upgrade(t, m, host, stateDir, 3)
			var mu sync.Mutex
			commits := 0
			host.Override = func(ctx context.Context, method string, params any) (any, bool, error) {
				if method != "kv.commit" {
					return nil, false, nil
				}
				mu.Lock()
				defer mu.Unlock()
				commits++
				if commits == 2 {
					return nil, true, errors.New("the host went away")
				}
				return nil, false, nil
			}
			err := c.Call(ctx, "configure", configure(0, 2), nil)
			require.Error(t, err, "the migration was cut short")
			ids, err := notes.Store{Dir: stateDir + "/inbox"}.IDs()
			require.NoError(t, err)
			legacy, indexed, count := layout(t, host, ids)
			require.Equal(t, [2]int{2, 1}, [2]int{legacy, indexed}, "one batch applied, atomically")
			require.Nil(t, count)

			require.NoError(t, c.Call(ctx, "configure", configure(0, 2), nil))
			legacy, indexed, count = layout(t, host, ids)
			assert.Equal(t, [2]int{0, 3}, [2]int{legacy, indexed})
			assert.JSONEq(t, `{"notes":3}`, string(count))
		})
	}
}

// TestKVDowngrade: an older release started against a KV layout a newer
// one migrated refuses configure with kv_downgrade. (The host refuses it
// before starting the process at all; this is the extension's own guard.)
func TestKVDowngrade(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			for _, release := range []int{1, 2} {
				c := m.start(t, release, sdktest.New())
				require.NoError(t, c.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}, StateDir: t.TempDir()}, nil))
				err := c.Call(ctx, "configure", configure(2, 0), nil)
				assert.ErrorIs(t, err, protocol.ErrKVDowngrade, "release %d", release)
			}
		})
	}
}
