package daemon

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The answer's hand-written encoding writes exactly what encoding/json's
// Encoder wrote for it, whichever path it takes.
func TestWebhookAnswerEncodesAsEncodingJSON(t *testing.T) {
	for _, a := range []webhookAnswer{
		{},
		{Accepted: 1, Events: []string{"ev-3f1c0a9d2b7e4f60a1b2c3d4e5f60718"}},
		{Accepted: 2, Events: []string{"ev-1", "named-2"}},
		{Accepted: 1, Events: []string{"a<b>&\"c\"\\ é \u2028 \x7f"}},
		{Error: &webhookRefuse{Code: "unauthorized", Message: "X-Notes-Signature is not the body's HMAC-SHA256 <sic>"}},
	} {
		var want bytes.Buffer
		assert.NoError(t, json.NewEncoder(&want).Encode(a))
		assert.Equal(t, want.String(), string(a.appendJSON(nil)), "%+v", a)
	}
	assert.True(t, plainJSONString("ev-3f1c0a9d2b7e4f60a1b2c3d4e5f60718"), "the store's Event IDs take the hand-written path")
	assert.False(t, plainJSONString("a<b"))
}
