package schedule_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/certify"
)

// TestCertify certifies the package as `open-conduit extension certify
// ./extensions/schedule` does, over the wire under the real host (this
// test binary serving extension-run schedule): nothing fails, and the
// criteria of what schedule declares run and pass rather than skip.
func TestCertify(t *testing.T) {
	report, err := certify.Run(testContext(t), certify.Config{Dir: ".", Launch: certify.HostLaunch("")})
	require.NoError(t, err)
	status := map[string]certify.Status{}
	for _, r := range report.Results {
		status[r.ID] = r.Status
		assert.Contains(t, []certify.Status{certify.StatusPass, certify.StatusSkip}, r.Status, "%s: %s", r.ID, r.Detail)
	}
	for _, id := range []string{"lifecycle/handshake", "lifecycle/crash-restart", "manifest/valid", "routes/display", "routes/pure",
		"routes/samples", "tasks/interval", "transactions/deadline", "validate/answers"} {
		assert.Equal(t, certify.StatusPass, status[id], "%s must run and pass", id)
	}
	assert.Equal(t, certify.ExitOK, report.ExitCode())
}
