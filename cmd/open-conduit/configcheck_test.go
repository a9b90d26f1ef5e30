package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/daemontest"
)

// nostartDir is a package whose process exits before its handshake.
var nostartDir = filepath.Join("testdata", "nostart")

// configCheckRun is one run of the built binary's `config check`.
type configCheckRun struct {
	code           int
	stdout, stderr string
	// tmp is the TMPDIR the run had, empty afterwards when the check
	// removed its temporary state directory.
	tmp string
}

// runConfigCheck runs `open-conduit config check --config DIR ARGS…` as
// the built binary, which serves the bundled packages' processes.
func runConfigCheck(t *testing.T, configDir string, args ...string) configCheckRun {
	t.Helper()
	r := configCheckRun{tmp: t.TempDir()}
	cmd := exec.Command(daemonBinary(t), append([]string{"config", "check", "--config", configDir}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+r.tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("config check did not run: %v", err)
	}
	r.stdout, r.stderr = stdout.String(), stderr.String()
	return r
}

// checkReport decodes a --json run.
func checkReport(t *testing.T, r configCheckRun) configCheckJSON {
	t.Helper()
	var rep configCheckJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), "config check --json prints JSON:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	return rep
}

type configCheckJSON struct {
	File        string              `json:"file"`
	Found       bool                `json:"found"`
	Valid       bool                `json:"valid"`
	Diagnostics []client.Diagnostic `json:"diagnostics"`
	Started     []struct {
		Name  string `json:"name"`
		Error string `json:"error"`
	} `json:"started"`
}

func (r configCheckJSON) started() map[string]string {
	out := map[string]string{}
	for _, s := range r.Started {
		out[s.Name] = s.Error
	}
	return out
}

// assertTempRemoved: the check left nothing in its TMPDIR (its temporary
// state directory, the packages' private state and logs, is gone).
func assertTempRemoved(t *testing.T, r configCheckRun) {
	t.Helper()
	left, err := os.ReadDir(r.tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "the temporary state directory is removed afterwards")
}

func configDirWith(t *testing.T, doc string, pkgs ...string) string {
	t.Helper()
	dir := daemontest.TempDir(t)
	for _, p := range pkgs {
		require.NoError(t, daemontest.Install(dir, p))
	}
	if doc != "" {
		require.NoError(t, daemontest.WriteConfig(dir, []byte(doc)))
	}
	return dir
}

// TestConfigCheckGoodConfig: a valid document exits 0, having started
// notes (its objects are in the document) for validate and removed the
// temporary state; no store is made in the config directory.
func TestConfigCheckGoodConfig(t *testing.T) {
	dir := configDirWith(t, notesConfig, notesDir)
	r := runConfigCheck(t, dir)
	assert.Equal(t, exitOK, r.code, "valid: exit 0\n%s%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, filepath.Join(dir, "config.json")+": valid")
	assert.Contains(t, r.stdout, "package notes 3.0.0 started for validate")
	assertTempRemoved(t, r)

	r = runConfigCheck(t, dir, "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	rep := checkReport(t, r)
	assert.True(t, rep.Valid)
	assert.True(t, rep.Found)
	assert.Empty(t, rep.Diagnostics)
	assert.Equal(t, map[string]string{"notes": ""}, rep.started())
	assertTempRemoved(t, r)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"config.json", "extensions"}, names, "no store, no state, no socket")
}

// TestConfigCheckStartsOnlyUsedPackages: a document with no notes object
// starts no package; a missing file is the empty configuration, valid.
func TestConfigCheckStartsOnlyUsedPackages(t *testing.T) {
	dir := configDirWith(t, `{"scopes":[{"id":"empty"}]}`, notesDir, nostartDir)
	r := runConfigCheck(t, dir, "--json")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Empty(t, checkReport(t, r).Started, "no package's objects: none started (nostart would have failed)")

	dir = configDirWith(t, "", notesDir)
	r = runConfigCheck(t, dir)
	assert.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "no such file: the empty configuration (no scopes) is valid")
}

// TestConfigCheckBadConfig: every problem is listed with its JSON path and
// rule, the host's own (an unknown handler) and the package's (notes'
// validate refusing a digest), and the exit status is 1.
func TestConfigCheckBadConfig(t *testing.T) {
	const bad = `{
  "scopes": [
    {
      "id": "home",
      "entries": [{"id": "inbox", "type": "notes", "config": {"digest": "25:99"}}],
      "routes": [{"handler": "notes", "kind": "notes-review", "config": {"tag": "todo", "colour": "red"}}]
    }
  ]
}`
	dir := configDirWith(t, bad, notesDir)
	r := runConfigCheck(t, dir, "--json")
	assert.Equal(t, exitFail, r.code, "invalid: exit 1")
	rep := checkReport(t, r)
	assert.False(t, rep.Valid)
	assert.ElementsMatch(t, []string{
		"$.scopes[0].entries[0] invalid_config",
		"$.scopes[0].routes[0].config invalid_config",
	}, diagnosticKeys(rep.Diagnostics))
	assertTempRemoved(t, r)

	// The host's static checks come first: an unknown handler is named
	// by its path before any package is asked.
	dir = configDirWith(t, `{"scopes":[{"id":"home","routes":[{"handler":"nope","kind":"notes-review"}],"extra":1}]}`, notesDir)
	r = runConfigCheck(t, dir)
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.stdout, "$.scopes[0].extra: unknown_field")

	dir = configDirWith(t, `{"scopes":[{"id":"home","routes":[{"handler":"nope","kind":"notes-review"}]}]}`, notesDir)
	r = runConfigCheck(t, dir)
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.stdout, "$.scopes[0].routes[0].handler: unknown_handler")
}

// TestConfigCheckPackageThatCannotStart: nostart exits before its
// handshake, so its object is refused with extension_unavailable naming
// it; notes, which starts, still checks its own.
func TestConfigCheckPackageThatCannotStart(t *testing.T) {
	const doc = `{"scopes":[{"id":"home","entries":[
  {"id": "inbox", "type": "notes", "config": {"digest": "nope"}},
  {"id": "thing", "type": "nostart"}
]}]}`
	dir := configDirWith(t, doc, notesDir, nostartDir)
	r := runConfigCheck(t, dir, "--json")
	assert.Equal(t, exitFail, r.code)
	rep := checkReport(t, r)
	assert.ElementsMatch(t, []string{
		"$.scopes[0].entries[0] invalid_config",
		"$.scopes[0].entries[1] extension_unavailable",
	}, diagnosticKeys(rep.Diagnostics))
	for _, d := range rep.Diagnostics {
		if d.Rule == "extension_unavailable" {
			assert.Contains(t, d.Message, "package nostart", "the diagnostic names the package")
		}
	}
	started := rep.started()
	require.Contains(t, started, "nostart")
	assert.NotEmpty(t, started["nostart"], "its start failed")
	assert.Equal(t, "", started["notes"], "notes started")
	assertTempRemoved(t, r)
}

// TestConfigCheckMissingDirectory: a --config that is not a directory is
// a failure, not the empty configuration passing.
func TestConfigCheckMissingDirectory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	code, stdout, stderr := runWords("config", "check", "--config", missing)
	assert.Equal(t, exitFail, code, stdout)
	assert.Contains(t, stderr, missing+" is not a config directory")
}

func TestConfigCheckUsage(t *testing.T) {
	code, _, stderr := runWords("config", "check", "extra")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "takes no arguments")
	code, _, stderr = runWords("config", "check", "--bogus")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "flag provided but not defined")
}
