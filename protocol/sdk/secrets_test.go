package sdk_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// resolves counts the secret.resolve calls the fake host answered.
func resolves(fake *sdktest.Host) int {
	n := 0
	for _, c := range fake.Calls() {
		if c == "secret.resolve" {
			n++
		}
	}
	return n
}

// TestSecretCacheResolvesOncePerGeneration: a connection's secret is
// resolved on the first request of a generation only, each connection on
// its own; Reset makes the next request resolve again (a rotated secret
// takes effect); an empty or refused secret is answered and never cached.
func TestSecretCacheResolvesOncePerGeneration(t *testing.T) {
	ctx := testContext(t)
	fake := sdktest.New()
	fake.SetSecrets("hook", map[string]string{"token": "one"})
	fake.SetSecrets("other", map[string]string{"token": "two"})
	fake.SetSecrets("blank", map[string]string{"token": ""})
	host := hostOver(t, "wire", fake)
	cache := &sdk.SecretCache{Name: "token"}

	for range 3 {
		s, err := cache.Get(ctx, host, "team", "hook")
		require.NoError(t, err)
		assert.Equal(t, "one", string(s))
	}
	assert.Equal(t, 1, resolves(fake), "one resolution for the generation")
	s, err := cache.Get(ctx, host, "team", "other")
	require.NoError(t, err)
	assert.Equal(t, "two", string(s), "each connection has its own secret")
	assert.Equal(t, 2, resolves(fake))

	fake.SetSecrets("hook", map[string]string{"token": "rotated"})
	s, err = cache.Get(ctx, host, "team", "hook")
	require.NoError(t, err)
	assert.Equal(t, "one", string(s), "within the generation the cached secret serves")
	cache.Reset()
	s, err = cache.Get(ctx, host, "team", "hook")
	require.NoError(t, err)
	assert.Equal(t, "rotated", string(s), "a new generation resolves again")
	assert.Equal(t, 3, resolves(fake))

	for range 2 {
		_, err = cache.Get(ctx, host, "team", "blank")
		assert.ErrorIs(t, err, protocol.ErrNotFound, "an empty secret is no secret")
	}
	assert.Equal(t, 5, resolves(fake), "an empty secret is not cached")
}

// TestSecretCacheResolveHook: a package's own Resolve (one that retries)
// is used in place of the host call, with the params the cache would send.
func TestSecretCacheResolveHook(t *testing.T) {
	ctx := testContext(t)
	fake := sdktest.New()
	fake.SetSecrets("hook", map[string]string{"secret": "s3"})
	host := hostOver(t, "inprocess", fake)
	var asked []protocol.SecretResolveParams
	cache := &sdk.SecretCache{Name: "secret", Resolve: func(ctx context.Context, h *sdk.Host, p protocol.SecretResolveParams) (map[string]string, error) {
		asked = append(asked, p)
		if len(asked) == 1 {
			return nil, protocol.ErrReentrantCall
		}
		return h.SecretResolve(ctx, p)
	}}
	_, err := cache.Get(ctx, host, "team", "hook")
	assert.ErrorIs(t, err, protocol.ErrReentrantCall, "a refusal is answered as it is")
	s, err := cache.Get(ctx, host, "team", "hook")
	require.NoError(t, err)
	assert.Equal(t, "s3", string(s), "and cached nothing")
	want := protocol.SecretResolveParams{Connection: "hook", ScopeID: "team", Names: []string{"secret"}}
	assert.Equal(t, []protocol.SecretResolveParams{want, want}, asked)
	assert.True(t, slices.Contains(fake.Calls(), "secret.resolve"))
}
