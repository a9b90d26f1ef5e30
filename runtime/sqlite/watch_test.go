package sqlite_test

import (
	"context"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
)

// doneCounter counts the calls of its Done made on one goroutine (the
// transaction's): database/sql and the driver ask for a statement's
// context's Done there before they start a goroutine to watch it (per
// transaction, per Rows and per statement). Calls from such watchers
// (BEGIN's, which waits with ctx) are not counted.
type doneCounter struct {
	context.Context
	goroutine atomic.Int64
	calls     atomic.Int64
}

func (c *doneCounter) Done() <-chan struct{} {
	if goroutineID() == c.goroutine.Load() {
		c.calls.Add(1)
	}
	return c.Context.Done()
}

// goroutineID is the calling goroutine's number, from its stack's header.
func goroutineID() int64 {
	buf := make([]byte, 64)
	buf = buf[:goruntime.Stack(buf, false)]
	f := strings.Fields(string(buf)) // "goroutine 7 [running]:"
	id, _ := strconv.ParseInt(f[1], 10, 64)
	return id
}

// A write transaction's statements run on the writer without watching the
// caller's context, synced or deferred: no goroutine waits on it per
// statement or per transaction. A cancel still stops the next statement
// and the commit.
func TestWriteStatementsDoNotWatchTheContext(t *testing.T) {
	s := openStore(t, t.TempDir())
	transacts := map[string]func(context.Context, func(runtime.Tx) error) error{
		"synced":   s.Transact,
		"deferred": s.TransactDeferSync,
	}
	for _, mode := range []string{"synced", "deferred"} {
		transact := transacts[mode]
		parent, cancel := context.WithCancel(t.Context())
		ctx := &doneCounter{Context: parent}
		var during int64
		require.NoError(t, transact(ctx, func(tx runtime.Tx) error {
			ctx.goroutine.Store(goroutineID())
			before := ctx.calls.Load()
			if err := putKV("k-"+mode, "v")(tx); err != nil {
				return err
			}
			if _, _, err := tx.KVGet("ns", "k-"+mode); err != nil {
				return err
			}
			if _, err := tx.Works(runtime.WorkFilter{Limit: 10}); err != nil {
				return err
			}
			during = ctx.calls.Load() - before
			return nil
		}))
		assert.Zero(t, during, "%s: the statements asked for ctx.Done", mode)

		err := transact(ctx, func(tx runtime.Tx) error {
			require.NoError(t, putKV("cancelled-"+mode, "v")(tx))
			cancel()
			_, _, err := tx.KVGet("ns", "k-"+mode)
			assert.ErrorIs(t, err, context.Canceled, "%s: a statement after the cancel", mode)
			return nil
		})
		assert.ErrorIs(t, err, context.Canceled, "%s: the commit after a cancel", mode)
		_, found := kvValue(t, s, "cancelled-"+mode)
		assert.False(t, found, "%s: a cancelled transaction committed", mode)
	}
}
