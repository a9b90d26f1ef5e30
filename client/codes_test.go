package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
)

// TestCodes loops the whole table: every code has its own status, its own
// sentinel and survives the wire form.
func TestCodes(t *testing.T) {
	codes := client.Codes()
	require.NotEmpty(t, codes)
	statuses := map[int]client.Code{}
	sentinels := map[*client.Error]client.Code{}
	for _, code := range codes {
		t.Run(string(code), func(t *testing.T) {
			assert.True(t, code.Valid())
			status := code.HTTPStatus()
			assert.GreaterOrEqual(t, status, 400, "a refusal crosses as a 4xx or 5xx")
			assert.NotEmpty(t, http.StatusText(status))
			if other, dup := statuses[status]; dup {
				t.Errorf("status %d is both %s and %s", status, other, code)
			}
			statuses[status] = code
			assert.Equal(t, code, client.CodeForStatus(status), "the status names its code back")

			sentinel := code.Sentinel()
			require.NotNil(t, sentinel)
			assert.Equal(t, code, sentinel.Code)
			if other, dup := sentinels[sentinel]; dup {
				t.Errorf("one sentinel for %s and %s", other, code)
			}
			sentinels[sentinel] = code

			// A refusal with any message and context still matches its
			// sentinel, and only its sentinel.
			err := fmt.Errorf("context: %w", client.Errorf(code, "some %s", "detail"))
			assert.ErrorIs(t, err, sentinel)
			assert.Equal(t, code, client.CodeOf(err))
			for _, other := range codes {
				if other != code {
					assert.False(t, errors.Is(err, other.Sentinel()), "%s must not match %s", code, other)
				}
			}

			// The wire body round-trips.
			raw, jerr := json.Marshal(client.ErrorBody(client.Errorf(code, "m")))
			require.NoError(t, jerr)
			var body struct {
				Error struct {
					Code    client.Code `json:"code"`
					Message string      `json:"message"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(raw, &body))
			assert.Equal(t, code, body.Error.Code)
			assert.Equal(t, "m", body.Error.Message)
		})
	}
}

func TestCodeFallbacks(t *testing.T) {
	assert.False(t, client.Code("nope").Valid())
	assert.Equal(t, http.StatusInternalServerError, client.Code("nope").HTTPStatus())
	assert.Equal(t, client.ErrInternal, client.Code("nope").Sentinel())
	assert.Equal(t, client.CodeInternal, client.CodeForStatus(http.StatusTeapot))
	assert.Equal(t, client.CodeInternal, client.CodeOf(errors.New("plain")))
}
