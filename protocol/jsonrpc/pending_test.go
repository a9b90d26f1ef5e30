package jsonrpc_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// TestPreparedCallAgreesWithCall: a request prepared, sent and waited for
// gets the answer Call gets, and Prepare refuses what Call refuses (a
// message over the bound, params breaking the strict rule) with the same
// errors, sending nothing.
func TestPreparedCallAgreesWithCall(t *testing.T) {
	ctx := context.Background()
	served := 0
	a, _ := pipePair(t, nil, jsonrpc.HandlerFunc(func(_ context.Context, req *jsonrpc.Request) (any, error) {
		served++
		return json.RawMessage(req.Params), nil
	}), &jsonrpc.Options{MaxMessageBytes: 1024}, &jsonrpc.Options{MaxMessageBytes: 1024})

	var viaCall, viaPrepared json.RawMessage
	require.NoError(t, a.Call(ctx, "echo", map[string]int{"n": 1}, &viaCall))
	var o jsonrpc.Outgoing
	require.NoError(t, a.Prepare(&o, "echo", map[string]int{"n": 1}))
	p, err := o.Send(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Wait(&viaPrepared))
	assert.JSONEq(t, string(viaCall), string(viaPrepared))
	_, err = o.Send(ctx)
	assert.Error(t, err, "one Send per Prepare")

	big := map[string]string{"s": strings.Repeat("x", 2000)}
	callErr := a.Call(ctx, "echo", big, nil)
	prepErr := a.Prepare(&o, "echo", big)
	assert.ErrorIs(t, callErr, jsonrpc.ErrTooLarge)
	assert.ErrorIs(t, prepErr, jsonrpc.ErrTooLarge)
	_, err = o.Send(ctx)
	assert.Error(t, err, "a refused Prepare leaves nothing to send")

	bad := json.RawMessage("{\"s\":\"\xff\"}")
	callErr = a.Call(ctx, "echo", bad, nil)
	prepErr = a.Prepare(&o, "echo", bad)
	require.Error(t, callErr)
	assert.Equal(t, callErr.Error(), prepErr.Error())

	// Both refusals sent nothing: the peer served the two echoes only.
	require.NoError(t, a.Call(ctx, "echo", map[string]int{"n": 2}, nil))
	assert.Equal(t, 3, served)
}
