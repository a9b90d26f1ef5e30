package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// invokeBinary runs the built binary's `extension invoke` with args and
// stdin, and returns its exit status, stdout and stderr.
func invokeBinary(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(daemonBinary(t), append([]string{"extension", "invoke"}, args...)...)
	cmd.Env = []string{"INVOKE_TEST_SECRET=canary-passed-4412"}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, stdout.String(), stderr.String()
}

func TestInvokeCallsABundledPackageOnce(t *testing.T) {
	code, stdout, stderr := invokeBinary(t, `{"kind":"executor","type":"runner","config":{"command":"echo hi"}}`,
		"../../extensions/runner", "validate", "--params", "-", "--json", "--wall-time-ms", "20000", "--pass-env", "INVOKE_TEST_SECRET")
	require.Equal(t, exitOK, code, stderr)
	var rep struct {
		OK       bool `json:"ok"`
		Response struct {
			Method          string          `json:"method"`
			ProtocolVersion int             `json:"protocol_version"`
			Result          json.RawMessage `json:"result"`
		} `json:"response"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	assert.True(t, rep.OK)
	assert.Equal(t, "validate", rep.Response.Method)
	assert.Equal(t, 1, rep.Response.ProtocolVersion)
	assert.JSONEq(t, `{}`, string(rep.Response.Result))
	for _, stage := range []string{"launch", "initialize", "configure", "call", "shutdown", "cleanup"} {
		assert.Contains(t, stderr, "open-conduit extension invoke: "+stage+"\n", "progress on stderr")
	}
}

func TestInvokeReportsAFailureByItsCodeWithoutEchoingTheParams(t *testing.T) {
	// notes refuses an entry config it does not know; the refusal is the
	// extension's, so it is plugin_failed and its message is not repeated.
	params := `{"kind":"extension","type":"notes","scope_id":"s","id":"e","config":{"canary-param-7731":true}}`
	code, stdout, stderr := invokeBinary(t, "", "--json", "../../extensions/notes", "validate", "--params", params)
	assert.Equal(t, exitFail, code, stderr)
	var rep struct {
		OK    bool `json:"ok"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	assert.False(t, rep.OK)
	assert.Equal(t, "plugin_failed", rep.Error.Code)
	assert.NotContains(t, stdout+stderr, "canary-param-7731")

	code, _, stderr = invokeBinary(t, "", "../../extensions/notes", "validate", "--params", params)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "open-conduit extension invoke: plugin_failed: ")
	assert.NotContains(t, stderr, "canary-param-7731")
}

func TestInvokeUsageErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"no method":          {"../../extensions/notes"},
		"unknown flag":       {"--no-such-flag", "../../extensions/notes", "validate"},
		"limit out of range": {"../../extensions/notes", "validate", "--cleanup-time-ms", "9000"},
		"limits not JSON":    {"--limits", "{", "../../extensions/notes", "validate"},
		"params not JSON":    {"../../extensions/notes", "validate", "--params", `{"a":"canary-param-7731"`},
		"lifecycle method":   {"../../extensions/notes", "shutdown"},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, exitUsage, run(append([]string{"extension", "invoke"}, args...), &stdout, &stderr), stderr.String())
			assert.Contains(t, stderr.String(), "open-conduit extension invoke: ")
			assert.NotContains(t, stderr.String(), "canary-param-7731")
		})
	}
}

// TestInvokeLimitFlags: a limit flag reaches the call (a stdout limit
// smaller than the initialize answer ends it as size_limit on stdout) and
// wins over the same limit in --limits.
func TestInvokeLimitFlags(t *testing.T) {
	code, stdout, stderr := invokeBinary(t, "", "--json", "--limits", `{"max_stdout_bytes":1048576}`, "--max-stdout-bytes", "10",
		"../../extensions/runner", "validate")
	assert.Equal(t, exitFail, code, stderr)
	var rep struct {
		OK    bool `json:"ok"`
		Error struct {
			Code   string `json:"code"`
			Stream string `json:"stream"`
		} `json:"error"`
		Response struct {
			StdoutBytes int64 `json:"stdout_bytes"`
		} `json:"response"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	assert.False(t, rep.OK)
	assert.Equal(t, "size_limit", rep.Error.Code)
	assert.Equal(t, "stdout", rep.Error.Stream)
	assert.EqualValues(t, 11, rep.Response.StdoutBytes, "read to the first excess byte")
}
