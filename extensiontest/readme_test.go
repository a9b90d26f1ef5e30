package extensiontest_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	et "github.com/open-conduit/open-conduit/extensiontest"
)

// TestReadmeSection: README's "Test your extension" names every kind of
// step (each action field of Step) and the environment variables, so a
// new step kind cannot go undocumented.
func TestReadmeSection(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, section, found := strings.Cut(string(b), "## Test your extension")
	require.True(t, found, "README.md has no Test your extension section")
	section, _, _ = strings.Cut(section, "\n## ")
	st := reflect.TypeOf(et.Step{})
	for i := range st.NumField() {
		name := st.Field(i).Name
		if name == "Name" || name == "Description" || name == "Expect" {
			continue
		}
		assert.Contains(t, section, "`"+name+"`", "the section names the step field %s", name)
	}
	for _, env := range []string{et.BinEnv, et.KeepEnv} {
		assert.Contains(t, section, env+"=", "the section shows %s", env)
	}
}
