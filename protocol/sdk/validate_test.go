package sdk_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// validate refuses a type the manifest does not declare for the kind, and
// otherwise answers what Extension.Validate decides; without one, a
// declared type is accepted. Both modes, so the wire form is the same.
func TestValidate(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			ext := (&demo{}).extension()
			var seen []protocol.ValidateParams
			ext.Validate = func(ctx context.Context, p protocol.ValidateParams) (protocol.ValidateResult, error) {
				seen = append(seen, p)
				if string(p.Config) == `{"bad":true}` {
					return protocol.ValidateResult{}, protocol.Errorf(protocol.CodeInvalid, "bad is not allowed")
				}
				return protocol.ValidateResult{Describe: []string{"a demo entry"}}, nil
			}
			c, _ := m.start(t, ext, sdktest.New())
			require.NoError(t, c.Call(ctx, "initialize", initParams, nil))

			var res protocol.ValidateResult
			require.NoError(t, c.Call(ctx, "validate", protocol.ValidateParams{Kind: protocol.ValidateExtension, Type: "demo",
				ScopeID: "s1", ID: "e1", Config: json.RawMessage(`{}`)}, &res))
			assert.Equal(t, []string{"a demo entry"}, res.Describe)

			err := c.Call(ctx, "validate", protocol.ValidateParams{Kind: protocol.ValidateExtension, Type: "demo", Config: json.RawMessage(`{"bad":true}`)}, &res)
			require.Error(t, err)
			assert.Equal(t, protocol.CodeInvalid, protocol.CodeOf(err))
			assert.Contains(t, err.Error(), "bad is not allowed")

			for _, p := range []protocol.ValidateParams{
				{Kind: protocol.ValidateExtension, Type: "other"},
				{Kind: protocol.ValidateExecutor, Type: "demo"},
				{Kind: "nonsense", Type: "demo"},
			} {
				err := c.Call(ctx, "validate", p, &res)
				require.Error(t, err, "%+v", p)
				assert.Equal(t, protocol.CodeInvalid, protocol.CodeOf(err), "%+v", p)
			}
			assert.Len(t, seen, 2, "undeclared types never reach Extension.Validate")
		})
	}
}

func TestValidateWithoutValidatorAcceptsDeclaredTypes(t *testing.T) {
	ctx := testContext(t)
	c, err := sdk.Attach((&demo{}).extension(), sdktest.New())
	require.NoError(t, err)
	require.NoError(t, c.Call(ctx, "initialize", initParams, nil))
	var res protocol.ValidateResult
	require.NoError(t, c.Call(ctx, "validate", protocol.ValidateParams{Kind: protocol.ValidateRoute, Type: "demo"}, &res))
	assert.Empty(t, res.Describe)
}
