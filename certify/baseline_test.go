package certify_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/certify"
)

func TestParseBaseline(t *testing.T) {
	ids, err := certify.ParseBaseline(strings.NewReader("# known failures\n\nkv/scoping\n  routes/display   # until the fix ships\r\n#routes/pure\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"kv/scoping", "routes/display"}, ids)

	ids, err = certify.ParseBaseline(strings.NewReader(""))
	require.NoError(t, err)
	assert.Empty(t, ids)

	for text, want := range map[string]string{
		"kv/scoping routes/pure\n": `baseline line 1: one criterion ID per line, not "kv/scoping routes/pure"`,
		"a/b\n\na/b\n":             "baseline line 3: a/b is already listed on line 1",
		strings.Repeat("x", 70000): "baseline: bufio.Scanner: token too long",
	} {
		_, err := certify.ParseBaseline(strings.NewReader(text))
		assert.ErrorIs(t, err, certify.ErrUsage)
		assert.EqualError(t, err, want)
	}
}

func FuzzParseBaseline(f *testing.F) {
	f.Add("kv/scoping\n# comment\nroutes/pure # trailing\n")
	f.Fuzz(func(t *testing.T, text string) {
		ids, err := certify.ParseBaseline(strings.NewReader(text))
		if err != nil {
			assert.ErrorIs(t, err, certify.ErrUsage)
			return
		}
		seen := map[string]bool{}
		for _, id := range ids {
			assert.NotEmpty(t, id)
			assert.NotContains(t, id, "#")
			assert.Len(t, strings.Fields(id), 1)
			assert.False(t, seen[id], "listed once")
			seen[id] = true
		}
	})
}
