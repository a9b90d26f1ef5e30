package jsonrpc_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// TestSeqNumbersRequestsInStreamOrder: whatever order the handlers start
// in, Request.Seq is each request's place among the requests on the
// stream, from 1; notifications, responses and cancellations take none.
// Request.ID is the id as it crossed.
func TestSeqNumbersRequestsInStreamOrder(t *testing.T) {
	const n = 20
	seqs := make(chan [2]uint64, n)
	notified := make(chan uint64, 1)
	p := newRawPeer(t, jsonrpc.HandlerFunc(func(_ context.Context, req *jsonrpc.Request) (any, error) {
		if req.Notification {
			assert.Nil(t, req.ID, "a notification has no id")
			notified <- req.Seq
			return nil, nil
		}
		var p struct{ I uint64 }
		assert.NoError(t, req.DecodeParams(&p))
		assert.Equal(t, fmt.Sprintf(`"r-%d"`, p.I), string(req.ID))
		seqs <- [2]uint64{p.I, req.Seq}
		return nil, nil
	}), nil)
	p.send(t, `{"jsonrpc":"2.0","method":"note"}`)
	p.send(t, `{"jsonrpc":"2.0","method":"$/cancel","params":{"id":99}}`)
	for i := 1; i <= n; i++ {
		p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":"r-%d","method":"m","params":{"i":%d}}`, i, i))
	}
	assert.Zero(t, <-notified, "a notification has no Seq")
	for range n {
		got := <-seqs
		assert.Equal(t, got[0], got[1], "request %d of the stream", got[0])
	}
}
