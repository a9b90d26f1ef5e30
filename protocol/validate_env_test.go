package protocol_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

// TestCheckPassEnv: pass_env_reserved refuses each OS_* and OPEN_CONDUIT_*
// grant with its index, and nothing else.
func TestCheckPassEnv(t *testing.T) {
	require.NoError(t, protocol.CheckPassEnv(nil))
	require.NoError(t, protocol.CheckPassEnv([]string{"HOME_DIR", "OS", "OPEN_CONDUIT", "OPEN_CONDUITX", "os_lower"}))

	err := protocol.CheckPassEnv([]string{"NOTES_HOME", "OS_TOKEN", "OPEN_CONDUIT_CONFIG"})
	require.Error(t, err)
	assert.ErrorIs(t, err, protocol.ErrInvalid)
	var got []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var se *protocol.SettingError
		require.True(t, errors.As(e, &se), "%T", e)
		assert.Equal(t, protocol.RulePassEnvReserved, se.Rule)
		got = append(got, se.Path)
	}
	assert.Equal(t, []string{"pass_env[1]", "pass_env[2]"}, got)
	assert.ErrorContains(t, err, `"OS_TOKEN" is reserved`)
}
