package shell_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/shell"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/internal/executortest"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// TestRunsInItsOwnDirectoryWithItsToolbelt: the command runs in the run's
// directory under the executor's runs directory, with its two streams in
// two files and the run's toolbelt endpoint and token in its environment.
func TestRunsInItsOwnDirectoryWithItsToolbelt(t *testing.T) {
	for _, m := range executortest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			f := executortest.NewFixture(t, executor, m)
			config, err := json.Marshal(shell.Config{Command: `pwd; echo out; echo err >&2; printf '%s %s\n' "$` +
				protocol.ToolbeltEndpointEnv + `" "$` + protocol.ToolbeltTokenEnv + `"`})
			require.NoError(t, err)
			require.NoError(t, f.C.Call(executortest.Context(t), "executor.run", protocol.ExecutorRunParams{Executor: shell.Name, RunID: "run-dir",
				Work:      protocol.Work{ID: "work-dir", ScopeID: "team", Kind: "job", State: "running"},
				Execution: protocol.Execution{ID: "ex-dir", WorkID: "work-dir", Attempt: 1, Executor: shell.Name, State: "running"},
				Config:    config, Endpoint: "unix:/somewhere/toolbelt.sock", Token: "tok-123"}, nil))
			assert.Equal(t, "succeeded", f.Wait(t, "run-dir").State)

			var rec executortest.Record
			require.NoError(t, json.Unmarshal(f.Recovery("run-dir"), &rec))
			assert.Equal(t, filepath.Join(f.Dir, "runs"), filepath.Dir(rec.Dir), "the run's directory is under the runs directory")
			stdout, err := os.ReadFile(filepath.Join(rec.Dir, shell.StdoutFile))
			require.NoError(t, err)
			assert.Equal(t, rec.Dir+"\nout\nunix:/somewhere/toolbelt.sock tok-123\n", string(stdout))
			stderr, err := os.ReadFile(filepath.Join(rec.Dir, shell.StderrFile))
			require.NoError(t, err)
			assert.Equal(t, "err\n", string(stderr), "stderr is kept apart")
		})
	}
}

// TestWaitWritesTheStreamsAsArtifacts: through the real host service with
// a blob store, a settled run's stdout and stderr become its artifacts,
// byte for byte, and the wait result says which.
func TestWaitWritesTheStreamsAsArtifacts(t *testing.T) {
	ctx := executortest.Context(t)
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	m := executor.Manifest(t)
	svc := host.NewService(host.ServiceConfig{Manifest: m, Store: st, Blobs: st})
	ext, err := sdk.Attach(shell.Extension(), svc)
	require.NoError(t, err)
	root := t.TempDir()
	_, err = host.Attach(ctx, ext, svc, root, protocol.ConfigureParams{})
	require.NoError(t, err)
	t.Cleanup(func() { executor.KillAllJobs(filepath.Join(root, "executors", shell.Name)) })

	runID, _ := svc.OpenRecordingRun("work-art", "ex-art")
	config, _ := json.Marshal(shell.Config{Command: `printf 'to stdout\n'; printf 'to stderr\n' >&2; exit 2`})
	require.NoError(t, ext.Call(ctx, "executor.run", protocol.ExecutorRunParams{Executor: shell.Name, RunID: runID,
		Work:      protocol.Work{ID: "work-art", ScopeID: "team", Kind: "job", State: "running"},
		Execution: protocol.Execution{ID: "ex-art", WorkID: "work-art", Attempt: 1, Executor: shell.Name, State: "running"},
		Config:    config}, nil))
	var res protocol.ExecutorWaitResult
	require.NoError(t, ext.Call(ctx, "executor.wait", protocol.ExecutorWaitParams{Executor: shell.Name, RunID: runID}, &res))
	assert.Equal(t, "failed", res.State)
	assert.Equal(t, 2, res.ExitCode)
	var out shell.Output
	require.NoError(t, json.Unmarshal(res.Output, &out))
	assert.Empty(t, out.ArtifactError)
	assert.EqualValues(t, len("to stdout\n"), out.StdoutBytes)
	assert.EqualValues(t, len("to stderr\n"), out.StderrBytes)
	require.Len(t, out.Artifacts, 2)

	var arts []runtime.Artifact
	require.NoError(t, st.View(ctx, func(tx runtime.ReadTx) error {
		var err error
		arts, err = tx.Artifacts("work-art")
		return err
	}))
	got := map[string]string{}
	for _, a := range arts {
		assert.Equal(t, "ex-art", a.ExecutionID)
		assert.Equal(t, "text/plain", a.MediaType)
		assert.Equal(t, out.Artifacts[a.Name], a.ID)
		rc, err := st.OpenBlob(a.Digest)
		require.NoError(t, err)
		b, err := io.ReadAll(rc)
		rc.Close()
		require.NoError(t, err)
		got[a.Name] = string(b)
	}
	assert.Equal(t, map[string]string{shell.StdoutFile: "to stdout\n", shell.StderrFile: "to stderr\n"}, got)

	// A second wait of the run answers the same without writing again.
	var again protocol.ExecutorWaitResult
	require.NoError(t, ext.Call(ctx, "executor.wait", protocol.ExecutorWaitParams{Executor: shell.Name, RunID: runID}, &again))
	assert.JSONEq(t, string(res.Output), string(again.Output))
	require.NoError(t, st.View(ctx, func(tx runtime.ReadTx) error {
		var err error
		arts, err = tx.Artifacts("work-art")
		return err
	}))
	assert.Len(t, arts, 2)
}

func TestValidateExecutorConfig(t *testing.T) {
	ext, err := sdk.Attach(shell.Extension(), sdktest.New())
	require.NoError(t, err)
	require.NoError(t, ext.Call(executortest.Context(t), "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1},
		StateDir: t.TempDir(), ExecutorDirs: map[string]string{shell.Name: t.TempDir()}}, nil))
	for name, c := range map[string]struct {
		config string
		ok     bool
	}{
		"a command":              {`{"command":"echo hi"}`, true},
		"no command":             {`{}`, true},
		"unknown member":         {`{"command":"echo hi","cwd":"/tmp"}`, false},
		"member in another case": {`{"Command":"echo hi"}`, false},
		"null":                   {`null`, true},
		"not a string":           {`{"command":7}`, false},
		"not an object":          {`"echo hi"`, false},
	} {
		t.Run(name, func(t *testing.T) {
			var res protocol.ValidateResult
			err := ext.Call(context.Background(), "validate", protocol.ValidateParams{Kind: protocol.ValidateExecutor, Type: shell.Name,
				Config: json.RawMessage(c.config)}, &res)
			if c.ok {
				require.NoError(t, err)
				assert.Len(t, res.Describe, 1)
				return
			}
			assert.ErrorIs(t, err, protocol.ErrInvalid)
			assert.False(t, strings.Contains(err.Error(), "/tmp") || strings.Contains(err.Error(), "echo hi"), "the refusal echoes the config")
		})
	}
}
