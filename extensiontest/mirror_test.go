package extensiontest

import (
	"os"
	"reflect"
	"strings"
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

// TestConfigMirrorsTheDaemons: Config has the daemon's configuration
// document's JSON shape, field for field (the daemon's types live in
// host/daemon, which the harness may not import), so nothing an author
// sets is a field the daemon does not know, and nothing the daemon reads
// is missing.
func TestConfigMirrorsTheDaemons(t *testing.T) {
	want := jsonShape(reflect.TypeOf(hostdaemon.Config{}), "")
	require.Greater(t, len(want), 20, "the daemon's document has its fields: %v", want)
	assert.Equal(t, want, jsonShape(reflect.TypeOf(Config{}), ""))
}

// jsonShape lists every JSON path of t with its kind.
func jsonShape(t reflect.Type, at string) []string {
	var out []string
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice:
		return jsonShape(t.Elem(), at+"[]")
	case reflect.Map:
		return append(out, at+" map of "+t.Elem().Kind().String())
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			out = append(out, jsonShape(f.Type, at+"."+name)...)
		}
		return out
	}
	return append(out, at+" "+t.Kind().String())
}
