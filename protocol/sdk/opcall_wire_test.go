package sdk_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// operation.call over the wire decodes its params with their codec on a
// fast path; whatever it takes, the handler gets what encoding/json
// decodes and the host gets the answer it did before: the handler's
// output, or for params the codec does not take, the same refusal
// DecodeParams gives (the reference here).
func TestOperationCallOverTheWireAnswersAsDecodeParams(t *testing.T) {
	var got []protocol.OperationCallParams
	ext := &sdk.Extension{
		Manifest: []byte(`{"name":"bench","version":"1.0.0","command":["bench"],"protocol":[1],` +
			`"provides":{"operations":[{"name":"bench.echo","kind":"handler"},{"name":"bench.wait","kind":"wait"}]}}`),
		Operations: map[string]sdk.Operation{
			"bench.echo": {Handler: func(_ context.Context, _ *sdk.Host, c protocol.OperationCallParams) (protocol.OperationCallResult, error) {
				got = append(got, c)
				return protocol.OperationCallResult{Output: c.Input}, nil
			}},
			"bench.wait": {Wait: func(context.Context, *sdk.Host, protocol.OperationWaitParams) (protocol.OperationWaitResult, error) {
				return protocol.OperationWaitResult{}, nil
			}},
		},
		Logf: func(string, ...any) {},
	}
	host := servedOverPipes(t, ext)
	for _, params := range []string{
		`{"operation":"bench.echo","input":{"seq":1,"text":"hello, \u00e9\"\\\n"},"authority":{"scope_id":"s"}}`,
		`{"authority":{"scope_id":"s","work_id":"w"},"input":[1,2,{"a":null}],"request_id":"r","operation":"bench.echo"}`,
		`{"operation":"bench.echo"}`,
		`{"operation":"bench.echo","input":null}`,
		`{"operation":"bench.echo","input":"\u0041"}`,
		`{"operation":"bench.echo","authority":null}`,
		`{"operation":"bench.\u0065cho","input":1}`,             // an escaped name: encoding/json's path
		`{"Operation":"bench.echo","input":2}`,                  // a name in another case: encoding/json matches it
		`{"operation":"bench.echo","extra":1}`,                  // unknown members are ignored, as encoding/json does
		`{"operation":7}`,                                       // a type error
		`{"operation":"bench.echo","authority":{"scope_id":3}}`, // a nested type error
		`{"operation":"bench.wait"}`,                            // another kind
		`{"operation":"bench.nope"}`,                            // undeclared
		`{}`,
		`[]`,
		`null`,
	} {
		t.Run(params, func(t *testing.T) {
			got = nil
			want, decodeErr := protocol.DecodeParams[protocol.OperationCallParams](json.RawMessage(params))
			var res protocol.OperationCallResult
			err := host.Call(t.Context(), "operation.call", json.RawMessage(params), &res)
			if decodeErr != nil {
				require.Error(t, err)
				assert.Equal(t, protocol.CodeOf(decodeErr), protocol.CodeOf(err))
				assert.Contains(t, err.Error(), decodeErr.Error())
				assert.Empty(t, got, "the handler ran on params that do not decode")
				return
			}
			if want.Operation != "bench.echo" {
				assert.Error(t, err)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, want, got[0], "the handler got other params than encoding/json decodes")
			assert.Equal(t, string(want.Input), string(res.Output))
		})
	}
}
