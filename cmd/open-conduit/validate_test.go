package main

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

// TestValidateReadsAtMostTheLimit: a manifest far over MaxManifestBytes is
// refused as json.size after reading little more than the limit, not the
// whole file (a sparse 64 MiB file here; 1 GiB cost 1 GiB of memory).
func TestValidateReadsAtMostTheLimit(t *testing.T) {
	const size = 64 << 20
	path := filepath.Join(t.TempDir(), protocol.ManifestFile)
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(size))
	require.NoError(t, f.Close())

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	report := validateManifest(path)
	runtime.ReadMemStats(&after)

	require.False(t, report.Valid)
	require.Len(t, report.Problems, 1)
	assert.Equal(t, protocol.RuleJSONSize, report.Problems[0].Rule)
	assert.Contains(t, report.Problems[0].Message, "67108864", "the refusal gives the file's real size")
	allocated := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, allocated, uint64(8*protocol.MaxManifestBytes), "validate allocated %d bytes for a %d-byte file", allocated, size)
}
