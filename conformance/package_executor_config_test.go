package conformance_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/protocol"
)

const executorInputsManifest = `{"name":"bot","version":"1.0.0","command":["bot"],"protocol":[1],
 "provides":{"executors":[{"name":"bot","labels":{},"fields":[{"name":"script","required":true}]}]}}`

// An executors entry keeps the author's three run configs as written;
// anything else in its place is refused with its path.
func TestParseInputsExecutors(t *testing.T) {
	m, err := protocol.ParseManifest([]byte(executorInputsManifest))
	require.NoError(t, err)
	in, err := conformance.ParseInputs([]byte(`{"executors": {"bot": {
	  "quick": {"script": []}, "short": {"script": [{"think": "1s"}], "b": 1}, "long": {"script": [{"think": "2m"}]}}}}`), m)
	require.NoError(t, err)
	assert.Equal(t, conformance.InputExecutor{
		Quick: json.RawMessage(`{"script":[]}`),
		Short: json.RawMessage(`{"script":[{"think":"1s"}],"b":1}`),
		Long:  json.RawMessage(`{"script":[{"think":"2m"}]}`),
	}, in.Executors["bot"])

	for _, tc := range []struct{ doc, path, message string }{
		{`{"executors": []}`, "$.executors", "want an object of executor names"},
		{`{"executors": {"other": {"quick": {}, "short": {}, "long": {}}}}`, `$.executors.other`, "not an executor the manifest declares"},
		{`{"executors": {"bot": {"quick": {}, "short": {}}}}`, `$.executors.bot`, `missing field "long"`},
		{`{"executors": {"bot": {"quick": {}, "short": {}, "long": {}, "slow": {}}}}`, `$.executors.bot.slow`, "unknown field"},
		{`{"executors": {"bot": {"quick": "exit 0", "short": {}, "long": {}}}}`, `$.executors.bot.quick`, "want an executor config object"},
		{`{"executors": {"bot": [{"quick": {}}]}}`, `$.executors.bot`, "want an object"},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			_, err := conformance.ParseInputs([]byte(tc.doc), m)
			var ie *conformance.InputsError
			require.ErrorAs(t, err, &ie)
			assert.Contains(t, ie.Path, tc.path)
			assert.Contains(t, ie.Message, tc.message)
		})
	}
}
