package shell

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/jobs"
)

//go:embed open-conduit-extension.json
var manifest []byte

// Name is the extension's name, and its executor's.
const Name = "shell"

// The files of a run's directory.
const (
	InputFile  = jobs.InputFile // a named pipe: the command's standard input
	StdoutFile = "stdout"       // the command's standard output
	StderrFile = "stderr"       // the command's standard error
	ExitFile   = jobs.ExitFile  // the command's exit status, written when it ends
	MetaFile   = jobs.MetaFile  // the run's Recovery, for a stop or forget of a run no executor process holds
)

// MaxArtifactBytes bounds what executor.wait writes of each stream as an
// artifact: the head of a longer stream, which stays whole in the run's
// directory until the run is forgotten.
const MaxArtifactBytes = 64 << 20

// StopGrace is how long stop waits after SIGTERM before it sends SIGKILL.
var StopGrace = jobs.DefaultStopGrace

// Recovery is the metadata a run persists through the host and
// executor.recover receives after a restart.
type Recovery = jobs.Recovery

// Config is a binding's executor config.
type Config struct {
	// Command is run with /bin/sh -c in the run's directory.
	Command string `json:"command"`
}

// decodeConfig reads a binding's executor config: an object with at most
// the member command, a string. The refusal never echoes the config.
func decodeConfig(raw json.RawMessage) (Config, error) {
	var c Config
	if len(raw) == 0 || string(raw) == "null" {
		return c, nil
	}
	refused := protocol.NewError(protocol.CodeInvalid, `executor config: want {"command": "<shell command>"} and nothing else`)
	// Member names exactly: encoding/json alone would take "Command".
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return Config{}, refused
	}
	for name := range members {
		if name != "command" {
			return Config{}, refused
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || dec.More() {
		return Config{}, refused
	}
	if strings.ContainsRune(c.Command, 0) {
		return Config{}, protocol.NewError(protocol.CodeInvalid, "executor config: the command holds a NUL byte")
	}
	return c, nil
}

// DefaultCommand is the job of a run whose binding names no command: it
// waits for one line on its input and exits with the status the line
// names (0 when empty). Whoever drives the Work says how it ends, by
// injecting that line.
const DefaultCommand = jobs.DefaultCommand

// command is what a run starts: the binding's command, else
// DefaultCommand. Only the operator's binding chooses what runs; nothing
// an Event or a route carries does.
func command(p protocol.ExecutorRunParams) (string, error) {
	c, err := decodeConfig(p.Config)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(c.Command) == "" {
		return DefaultCommand, nil
	}
	return c.Command, nil
}

// Extension returns the shell extension: a fresh value with its own
// table of jobs, ready for sdk.Serve or sdk.Attach. Its job model is
// protocol/sdk/jobs; what is shell's own is its two output files, its
// strict config, and the artifacts its wait writes.
func Extension() *sdk.Extension {
	x := jobs.New(jobs.Spec{Name: Name, Outputs: []string{StdoutFile, StderrFile}, Command: command,
		StopGrace: &StopGrace, Report: writeArtifacts})
	return &sdk.Extension{
		Manifest:   slices.Clone(manifest),
		Initialize: x.Initialize,
		Validate:   validate,
		Executors:  map[string]sdk.Executor{Name: x.Methods()},
	}
}

// validate checks a binding's executor config before the host applies it.
func validate(ctx context.Context, p protocol.ValidateParams) (protocol.ValidateResult, error) {
	if p.Kind != protocol.ValidateExecutor {
		return protocol.ValidateResult{}, nil
	}
	c, err := decodeConfig(p.Config)
	if err != nil {
		return protocol.ValidateResult{}, err
	}
	if strings.TrimSpace(c.Command) == "" {
		return protocol.ValidateResult{Describe: []string{"each run waits for one injected line and exits with the status it names"}}, nil
	}
	return protocol.ValidateResult{Describe: []string{"each run starts its command with /bin/sh -c in the run's own directory"}}, nil
}

// Output is the output of a settled run: how much each stream holds and
// the artifacts they were written to.
type Output struct {
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// Artifacts are the artifact ids by stream name; a stream the host
	// kept no artifact of (it has no artifact store, or refused) is
	// missing, and ArtifactError says why.
	Artifacts     map[string]string `json:"artifacts,omitempty"`
	ArtifactError string            `json:"artifact_error,omitempty"`
}

// writeArtifacts writes the run's stdout and stderr to the host as the
// artifacts of the run runID, and answers the run's Output.
func writeArtifacts(ctx context.Context, host *sdk.Host, runID, dir string) json.RawMessage {
	var out Output
	for _, name := range []string{StdoutFile, StderrFile} {
		size, id, err := writeArtifact(ctx, host, runID, name, filepath.Join(dir, name))
		if name == StdoutFile {
			out.StdoutBytes = size
		} else {
			out.StderrBytes = size
		}
		switch {
		case err != nil && out.ArtifactError == "":
			out.ArtifactError = fmt.Sprintf("%s: %v", name, err)
		case err == nil:
			if out.Artifacts == nil {
				out.Artifacts = map[string]string{}
			}
			out.Artifacts[name] = id
		}
	}
	b, _ := json.Marshal(out)
	return b
}

func writeArtifact(ctx context.Context, host *sdk.Host, runID, name, path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, "", err
	}
	w, err := host.CreateArtifact(ctx, protocol.ArtifactCreateParams{RunID: runID, Name: name, MediaType: "text/plain"})
	if err != nil {
		return info.Size(), "", err
	}
	if _, err := io.Copy(w, io.LimitReader(f, MaxArtifactBytes)); err != nil {
		w.Abort()
		return info.Size(), "", err
	}
	if err := w.Close(); err != nil {
		return info.Size(), "", err
	}
	return info.Size(), w.ID(), nil
}
