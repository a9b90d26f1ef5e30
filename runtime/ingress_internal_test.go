package runtime

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordHolds reads the encoding kvPut gives an item record; a change of
// reconcileItem's fields or their order must keep it true, or unchanged
// scans silently take the slow path.
func TestRecordHoldsReadsTheStoredEncoding(t *testing.T) {
	rec := reconcileItem{Version: `v"<1>`, Signature: "sha256:ab", Scan: "scan_cd", Raw: "ef01"}
	val, err := json.Marshal(rec)
	require.NoError(t, err)
	assert.Equal(t, val, kvPut(NamespaceIngress, "k", rec).Value, "the records are stored as json.Marshal encodes them")
	assert.True(t, recordHolds(val, rec.Version, rec.Raw))
	assert.False(t, recordHolds(val, "v2", rec.Raw), "another version")
	assert.False(t, recordHolds(val, rec.Version, "ef02"), "other bytes")
	old, err := json.Marshal(reconcileItem{Version: "v1", Signature: "sha256:ab", Scan: "scan_cd"})
	require.NoError(t, err)
	assert.False(t, recordHolds(old, "v1", ""), "a record from before Raw")
}
