package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extensions/agent"
	"github.com/open-conduit/open-conduit/internal/daemontest"
)

var agentDir = filepath.Join("..", "..", "extensions", "agent")

// warnDoc binds agent with an empty script, which agent's validate accepts
// with a warning; notesEntry is the scope's notes entry.
func warnDoc(notesEntry string) string {
	return `{"scopes": [{"id": "home",
  "entries": [` + notesEntry + `],
  "bindings": [{"name": "idle", "executor": "agent", "executor_config": {"script": []}}]}]}`
}

// TestConfigCommandsPrintPackageWarnings: against the built binary's
// daemon, config validate and config apply (accepted and refused) print
// the warnings a package gave about an object it accepted, with the
// object's JSON path and rule, in text and in --json; a document without
// one prints none.
func TestConfigCommandsPrintPackageWarnings(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Packages: []string{notesDir, agentDir}})
	write := func(name, doc string) string {
		path := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
		return path
	}
	good := write("good.json", warnDoc(`{"id": "inbox", "type": "notes", "config": {"digest": "07:30"}}`))
	refused := write("refused.json", warnDoc(`{"id": "inbox", "type": "notes", "config": {"digest": "25:99"}}`))
	quiet := write("quiet.json", `{"scopes": [{"id": "home", "entries": [{"id": "inbox", "type": "notes"}]}]}`)
	const path = "$.scopes[0].bindings[0].executor_config"
	want := client.Diagnostic{Path: path, Rule: "package_warning", Message: agent.WarnEmptyScript}
	line := "  " + path + ": package_warning: " + agent.WarnEmptyScript + "\n"

	code, stdout, stderr := ops(d, "config", "validate", good)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, good+": valid\nwarnings (1):\n"+line)

	var res client.ConfigResult
	opsJSON(t, d, &res, "config", "validate", good)
	assert.True(t, res.Valid)
	assert.Equal(t, []client.Diagnostic{want}, res.Warnings)

	code, stdout, stderr = ops(d, "config", "validate", refused)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stdout, "warnings (1):\n"+line, "an invalid document's warnings too\n%s%s", stdout, stderr)

	code, _, stderr = ops(d, "config", "apply", refused)
	assert.Equal(t, exitFail, code, "refused: exit 1")
	assert.Contains(t, stderr, "$.scopes[0].entries[0]", "the refusal's diagnostic")
	assert.Contains(t, stderr, "warnings (1):\n"+line, "a refused apply prints the warnings\n%s", stderr)

	code, stdout, _ = ops(d, "config", "apply", refused, "--json")
	assert.Equal(t, exitFail, code)
	res = client.ConfigResult{}
	require.NoError(t, json.Unmarshal([]byte(stdout), &res), stdout)
	assert.False(t, res.Valid)
	assert.NotEmpty(t, res.Diagnostics)
	assert.Equal(t, []client.Diagnostic{want}, res.Warnings)

	code, stdout, stderr = ops(d, "config", "apply", good)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `^applied .* as generation 1 \(.*\)\nwarnings \(1\):\n`, stdout)
	assert.Contains(t, stdout, line)

	res = client.ConfigResult{}
	opsJSON(t, d, &res, "config", "apply", good)
	assert.True(t, res.Valid)
	assert.Equal(t, []client.Diagnostic{want}, res.Warnings, "applying it again still warns")

	code, stdout, stderr = ops(d, "config", "apply", quiet)
	require.Equal(t, exitOK, code, stderr)
	assert.NotContains(t, stdout, "warnings", "no warning: no heading")
	code, stdout, _ = ops(d, "config", "validate", quiet)
	require.Equal(t, exitOK, code)
	assert.Equal(t, quiet+": valid\n", stdout)
}
