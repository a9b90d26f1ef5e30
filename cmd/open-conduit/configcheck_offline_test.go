package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
)

// offlinecheckDir is a package whose checks, four declared offline and
// one not, answer in every shape (testdata/offlinecheck/main.py).
var offlinecheckDir = filepath.Join("testdata", "offlinecheck")

// offlineChecks decodes a --json run's offline checks by name.
func offlineChecks(t *testing.T, r configCheckRun) map[string]client.DoctorCheck {
	t.Helper()
	var rep struct {
		Valid  bool                 `json:"valid"`
		Checks []client.DoctorCheck `json:"checks"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), "config check --json prints JSON:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.True(t, rep.Valid, "the document is valid: %s", r.stdout)
	out := map[string]client.DoctorCheck{}
	for _, c := range rep.Checks {
		out[c.Name] = c
	}
	return out
}

// offlineDoc uses offlinecheck in an enabled scope (home), whose entry's
// config is given, and in a disabled one (off), and notes in a third.
func offlineDoc(entryConfig string) string {
	return `{
  "scopes": [
    {"id": "home", "entries": [{"id": "c", "type": "offlinecheck", "config": ` + entryConfig + `}]},
    {"id": "off", "disabled": true, "entries": [{"id": "d", "type": "offlinecheck", "config": {"fail": true}}]},
    {"id": "n", "entries": [{"id": "inbox", "type": "notes", "config": {"digest": "07:30"}}]}
  ]
}`
}

// TestConfigCheckRunsOfflineChecks: config check is the offline doctor.
// Every check a started package declares offline runs through check.run
// and is graded and named as doctor does (an answer without status by
// its ok, an unknown status extension_check_invalid), with the view of
// the enabled scopes only; a check not declared offline never runs; notes'
// offline check is listed under its own name. A failing check fails the
// run (exit 1) while the document stays valid.
func TestConfigCheckRunsOfflineChecks(t *testing.T) {
	dir := configDirWith(t, offlineDoc(`{}`), notesDir, offlinecheckDir)
	r := runConfigCheck(t, dir, "--json")
	require.Equal(t, exitOK, r.code, "valid and no check fails: exit 0\n%s%s", r.stdout, r.stderr)
	checks := offlineChecks(t, r)
	for name, want := range map[string]client.DoctorCheck{
		"offlinecheck":        {Status: client.CheckOK, Detail: "scopes: home"},
		"offlinecheck_odd":    {Status: client.CheckWarn, Code: "extension_check_invalid"},
		"offlinecheck_bare":   {Status: client.CheckWarn, Code: "extension_check_failed", Detail: "not fine"},
		"offlinecheck_broken": {Status: client.CheckOK, Detail: "fine"},
	} {
		want.Name, want.Package = name, "offlinecheck"
		assert.Equal(t, want, checks[name], name)
	}
	assert.NotContains(t, checks, "offlinecheck_online", "a check not declared offline does not run offline")
	// notes' check reads the entries configure gave it, and an offline
	// configure is empty.
	assert.Equal(t, client.DoctorCheck{Name: "notes", Package: "notes", Status: client.CheckInfo, Code: "notes_no_entries",
		Detail: "no notes entry is configured"}, checks["notes"])
	assert.Len(t, checks, 5)
	assertTempRemoved(t, r)

	r = runConfigCheck(t, dir)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "offline checks:")
	assert.Regexp(t, `(?m)^offlinecheck_odd\s+warn\s+extension_check_invalid\s`, r.stdout)
	assert.Regexp(t, `(?m)^offlinecheck_bare\s+warn\s+extension_check_failed\s+not fine$`, r.stdout)
	assert.Regexp(t, `(?m)^notes\s+info\s+notes_no_entries\s`, r.stdout)
	assert.NotContains(t, r.stdout, "offlinecheck_online")

	dir = configDirWith(t, offlineDoc(`{"fail": true}`), notesDir, offlinecheckDir)
	r = runConfigCheck(t, dir, "--json")
	assert.Equal(t, exitFail, r.code, "a failing offline check: exit 1\n%s", r.stdout)
	assert.Equal(t, client.DoctorCheck{Name: "offlinecheck_broken", Package: "offlinecheck", Status: client.CheckFail,
		Code: "offlinecheck_broken", Detail: "told to fail", Items: []string{"home/c"}}, offlineChecks(t, r)["offlinecheck_broken"])
	assert.Contains(t, r.stderr, "1 checks failed")

	r = runConfigCheck(t, dir)
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.stdout, ": valid\n", "the document itself is valid")
	assert.Regexp(t, `(?m)^offlinecheck_broken\s+fail\s+offlinecheck_broken\s+told to fail$`, r.stdout)
	assert.Contains(t, r.stdout, "- home/c")
}

// TestConfigCheckOfflineChecksOnlyForEnabledUse: a package only a disabled
// scope uses is started for validate but its checks do not run (its
// check would have failed); a package the document does not use is never
// started, so none of its checks runs.
func TestConfigCheckOfflineChecksOnlyForEnabledUse(t *testing.T) {
	const doc = `{"scopes": [
  {"id": "off", "disabled": true, "entries": [{"id": "d", "type": "offlinecheck", "config": {"fail": true}}]},
  {"id": "empty"}
]}`
	dir := configDirWith(t, doc, offlinecheckDir, notesDir)
	r := runConfigCheck(t, dir, "--json")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Empty(t, offlineChecks(t, r), "no enabled scope uses a package: no check runs")
	assert.Equal(t, map[string]string{"offlinecheck": ""}, checkReport(t, r).started(), "validate started offlinecheck alone")
}
