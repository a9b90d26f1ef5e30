package daemon

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAPIValidateShowsWarnings: POST /v1/config/validate answers the
// packages' warnings about a valid configuration beside its verdict, and
// none when there are none.
func TestAPIValidateShowsWarnings(t *testing.T) {
	_, c := newAPITest(t)
	res, err := c.ValidateConfig(t.Context(), []byte(`{"scopes":["old"]}`))
	require.NoError(t, err)
	assert.True(t, res.Valid, "a warning refuses nothing")
	require.Len(t, res.Warnings, 1)
	assert.Equal(t, RulePackageWarning, res.Warnings[0].Rule)
	assert.Equal(t, "$.scopes", res.Warnings[0].Path)

	res, err = c.ValidateConfig(t.Context(), []byte(`{"scopes":["new"]}`))
	require.NoError(t, err)
	assert.True(t, res.Valid)
	assert.Empty(t, res.Warnings)
}
