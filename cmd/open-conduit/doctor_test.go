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
