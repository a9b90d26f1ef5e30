package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/daemontest"
)

func doctorChecks(rep client.DoctorReport) map[string]client.DoctorCheck {
	out := map[string]client.DoctorCheck{}
	for _, c := range rep.Checks {
		out[c.Name] = c
	}
	return out
}

// TestDoctorListsNotesCheck: against the built binary's daemon, doctor
// lists the daemon's own checks and notes' declared check under its name,
// run through check.run; with every check passing it exits 0. The state
// lock replaced under the daemon fails the lock check, and doctor exits 1.
func TestDoctorListsNotesCheck(t *testing.T) {
	ctx := serveContext(t)
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Packages: []string{notesDir}, Config: []byte(notesConfig)})

	rep, err := d.Client.Doctor(ctx, false)
	require.NoError(t, err)
	checks := doctorChecks(rep)
	for _, name := range []string{"extensions", "store", "lock", "notes"} {
		assert.Contains(t, checks, name)
	}
	assert.Equal(t, client.CheckOK, checks["extensions"].Status, checks["extensions"].Detail)
	assert.Contains(t, checks["extensions"].Items, "notes 3.0.0: ready, protocol 1, 0 restarts")
	assert.Equal(t, client.CheckOK, checks["store"].Status, checks["store"].Detail)
	assert.Equal(t, client.CheckOK, checks["lock"].Status, checks["lock"].Detail)
	notes := checks["notes"]
	assert.Equal(t, "notes", notes.Package)
	// notes' check reads the entries configure gave it: one entry whose
	// note store is under the package's state directory.
	assert.Contains(t, []string{client.CheckOK, client.CheckWarn}, notes.Status, "%+v", notes)
	assert.NotEqual(t, "notes_no_entries", notes.Code, "the check ran with the configured entry")
	assert.True(t, rep.OK)

	code, stdout, stderr := ops(d, "doctor")
	assert.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^notes\s+(ok|warn)\s`, stdout, "the table lists notes' check")
	assert.Regexp(t, `(?m)^extensions\s+ok\s`, stdout)

	code, stdout, _ = ops(d, "doctor", "--json")
	require.Equal(t, exitOK, code)
	var viaJSON client.DoctorReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &viaJSON))
	assert.Contains(t, doctorChecks(viaJSON), "notes")

	// A lock file replaced under the daemon would let a second one start.
	lock := filepath.Join(d.StateDir, "lock")
	require.NoError(t, os.Remove(lock))
	require.NoError(t, os.WriteFile(lock, []byte("1\n"), 0o600))
	code, stdout, stderr = ops(d, "doctor")
	assert.Equal(t, exitFail, code, "a failed check: exit 1\n%s", stdout)
	assert.Regexp(t, `(?m)^lock\s+fail\s+lock_lost`, stdout)
	assert.Contains(t, stderr, "1 checks failed")
}

var checkviewDir = filepath.Join("testdata", "checkview")

// TestDoctorCheckShapesAndView: against the built binary's daemon, each
// shape of check.run answer is graded and named as the spec says, a
// package check that fails makes doctor exit 1, and the view a check gets
// is how the configuration uses its package: the scope with its entry and
// the connection its entry names, config only, never a secret reference;
// not a scope that does not use it.
func TestDoctorCheckShapesAndView(t *testing.T) {
	const doc = `{
  "connections": [{"name": "api", "type": "checkview-api", "config": {"url": "https://example.test"},
    "secret_refs": {"token": "env:CHECKVIEW_SECRET"}}],
  "scopes": [
    {"id": "home", "connections": ["api"], "entries": [{"id": "c", "type": "checkview", "connection": "api", "config": {"k": 1}}]},
    {"id": "other", "entries": [{"id": "n", "type": "notes"}]}
  ]
}`
	ctx := serveContext(t)
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Packages: []string{checkviewDir, notesDir}, Config: []byte(doc)})
	rep, err := d.Client.Doctor(ctx, false)
	require.NoError(t, err)
	checks := doctorChecks(rep)

	for name, want := range map[string]client.DoctorCheck{
		"checkview":        {Status: client.CheckOK, Detail: "fine"},
		"checkview-bare":   {Status: client.CheckWarn, Code: "extension_check_failed", Detail: "not fine"},
		"checkview_odd":    {Status: client.CheckWarn, Code: "extension_check_invalid"},
		"checkview_broken": {Status: client.CheckFail, Code: "checkview_broken", Detail: "broken on purpose", Items: []string{"one", "two"}},
	} {
		want.Name, want.Package = name, "checkview"
		assert.Equal(t, want, checks[name], name)
	}
	assert.False(t, rep.OK, "a package's failed check fails the report")

	view := checks["checkview_view"]
	require.Equal(t, client.CheckInfo, view.Status, "%+v", view)
	assert.NotContains(t, view.Detail, "CHECKVIEW_SECRET")
	assert.NotContains(t, view.Detail, "env:")
	var got struct {
		Dir    string `json:"dir"`
		Scopes []struct {
			ID      string `json:"id"`
			Entries []struct {
				ID         string          `json:"id"`
				Config     json.RawMessage `json:"config"`
				Connection string          `json:"connection"`
			} `json:"entries"`
		} `json:"scopes"`
		Connections []struct {
			Name   string          `json:"name"`
			Config json.RawMessage `json:"config"`
		} `json:"connections"`
	}
	require.NoError(t, json.Unmarshal([]byte(view.Detail), &got), view.Detail)
	assert.Equal(t, d.ConfigDir, got.Dir)
	require.Len(t, got.Scopes, 1, "only the scope that uses checkview")
	assert.Equal(t, "home", got.Scopes[0].ID)
	require.Len(t, got.Scopes[0].Entries, 1)
	assert.Equal(t, "api", got.Scopes[0].Entries[0].Connection)
	assert.JSONEq(t, `{"k":1}`, string(got.Scopes[0].Entries[0].Config))
	require.Len(t, got.Connections, 1)
	assert.Equal(t, "api", got.Connections[0].Name)
	assert.JSONEq(t, `{"url":"https://example.test"}`, string(got.Connections[0].Config))

	code, stdout, stderr := ops(d, "doctor")
	assert.Equal(t, exitFail, code, stdout)
	assert.Regexp(t, `(?m)^checkview_broken\s+fail\s+checkview_broken\s+broken on purpose`, stdout)
	assert.Contains(t, stderr, "1 checks failed")
}
