package host

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// TestRunningSkipsAnInstanceWhoseConnectionEnded: between the connection's
// end and the goroutine that closes ended, the instance is still the
// current one; a call then must wait for the supervisor's restart, not
// meet the dead connection (prototypes/transport's crash_mid_call caught
// the first echo after a crash failing this way).
func TestRunningSkipsAnInstanceWhoseConnectionEnded(t *testing.T) {
	newInstance := func() *instance {
		r, w := io.Pipe()
		t.Cleanup(func() { r.Close(); w.Close() })
		conn := jsonrpc.NewConn(r, io.Discard, nil, nil)
		t.Cleanup(func() { conn.Close() })
		return &instance{conn: conn, ended: make(chan struct{})}
	}
	live := newInstance()
	p := &Process{name: "notes", state: Running, cur: live, ready: make(chan struct{})}
	got, err := p.running(context.Background(), false)
	require.NoError(t, err)
	assert.Same(t, live, got, "a live instance is the one calls go to")

	dead := newInstance()
	dead.conn.Close()
	<-dead.conn.Done()
	p.cur = dead // ended is still open, as it is for a moment after a crash
	_, err = p.running(context.Background(), false)
	assert.ErrorIs(t, err, ErrNotRunning, "an instance whose connection ended is not running")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = p.running(ctx, true)
	assert.ErrorIs(t, err, context.Canceled, "a waiting call waits for the next state, bounded by its context")
}

// BenchmarkRunning is the check every Process.Call makes of the running
// instance.
func BenchmarkRunning(b *testing.B) {
	r, w := io.Pipe()
	b.Cleanup(func() { r.Close(); w.Close() })
	conn := jsonrpc.NewConn(r, io.Discard, nil, nil)
	b.Cleanup(func() { conn.Close() })
	p := &Process{name: "notes", state: Running, cur: &instance{conn: conn, ended: make(chan struct{})}, ready: make(chan struct{})}
	ctx := context.Background()
	for range b.N {
		if _, err := p.running(ctx, true); err != nil {
			b.Fatal(err)
		}
	}
}
