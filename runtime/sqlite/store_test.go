package sqlite_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

func openStore(t testing.TB, dir string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStoreConformance(t *testing.T) {
	conformance.RunStore(t, func(t *testing.T) runtime.Store { return openStore(t, t.TempDir()) })
}
