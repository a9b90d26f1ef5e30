package jsonrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// closingInput is a peer's input that takes one message, hands it to the
// test, and then fails every write, as a pipe does once the peer closed
// its end.
type closingInput struct {
	mu    sync.Mutex
	taken int
	got   chan []byte
}

func (w *closingInput) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.taken > 0 {
		return 0, errors.New("broken pipe")
	}
	w.taken++
	w.got <- append([]byte(nil), b...)
	return len(b), nil
}

// TestAnswerWrittenBeforeThePeerClosedItsInputCounts: a peer answers a
// call and closes its input (a package exiting once it answered shutdown)
// while the next request is being written. That write fails, but the
// answer the peer had already sent is still read and completes its call;
// ended at once, the connection lost it.
func TestAnswerWrittenBeforeThePeerClosedItsInputCounts(t *testing.T) {
	pr, pw := io.Pipe()
	in := &closingInput{got: make(chan []byte, 1)}
	conn := jsonrpc.NewConn(pr, in, jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
		return nil, nil
	}), nil)
	defer conn.Close()
	ctx := context.Background()

	answered := make(chan error, 1)
	go func() { answered <- conn.Call(ctx, "shutdown", struct{}{}, nil) }()
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	require.NoError(t, json.Unmarshal(<-in.got, &req))

	// The next request meets the closed input.
	err := conn.Call(ctx, "configure", struct{}{}, nil)
	require.ErrorIs(t, err, jsonrpc.ErrTransport)

	// What the peer wrote before it went is still read.
	_, werr := fmt.Fprintf(pw, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", req.ID)
	require.NoError(t, werr)
	assert.NoError(t, <-answered, "the answer the peer sent before closing its input")
	pw.Close()
	<-conn.Done()
	assert.ErrorIs(t, conn.Err(), jsonrpc.ErrTransport)
}
