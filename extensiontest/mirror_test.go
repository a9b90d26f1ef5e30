package extensiontest

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/agent"
	hostdaemon "github.com/open-conduit/open-conduit/host/daemon"
	"github.com/open-conduit/open-conduit/protocol"
)

// TestAgentManifestIsTheBundledOne: the manifest a case installs for the
// scripted agent is extensions/agent's, byte for byte, so the daemon's
// handshake with `extension-run agent` matches what it discovered.
func TestAgentManifestIsTheBundledOne(t *testing.T) {
	bundled, err := os.ReadFile("../extensions/agent/" + protocol.ManifestFile)
	require.NoError(t, err)
	assert.Equal(t, string(bundled), agentManifest)
	assert.Equal(t, agent.TranscriptFile, agentTranscriptFile, "the harness reads the agent's transcript where it writes it")
}

// The harness writes the daemon's own configuration types (client's), so
// nothing an author sets is a field the daemon does not know: this fails
// to compile the day they part.
var _ hostdaemon.Config = Config{}
