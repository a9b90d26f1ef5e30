package sdk

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestResponseID reads the id of each response the transport writes,
// whatever the id, and none from a request.
func TestResponseID(t *testing.T) {
	cases := []struct {
		line, id string
		ok       bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, `7`, true},
		{`{"jsonrpc":"2.0","id":"a,b","error":{"code":-32000}}`, `"a,b"`, true},
		{`{"jsonrpc":"2.0","id":"q\"uo,te","result":null}`, `"q\"uo,te"`, true},
		{`{"jsonrpc":"2.0","id":"back\\","result":1}`, `"back\\"`, true},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}`, `null`, true},
		{`{"jsonrpc":"2.0","id":3,"method":"kv.get","params":{}}`, ``, false},
		{`{"jsonrpc":"2.0","id":"x,y","method":"kv.get"}`, ``, false},
		{`{"jsonrpc":"2.0","method":"$/cancel","params":{"id":1}}`, ``, false},
		{`{"jsonrpc":"2.0","id":"unterminated`, ``, false},
	}
	for _, c := range cases {
		id, ok := responseID([]byte(c.line))
		assert.Equal(t, c.ok, ok, c.line)
		assert.Equal(t, c.id, string(id), c.line)
	}
}
