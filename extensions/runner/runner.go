package runner

import (
	_ "embed"
	"encoding/json"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/jobs"
)

//go:embed open-conduit-extension.json
var manifest []byte

// Name is the extension's name, and its executor's.
const Name = "runner"

// The files of a run's directory.
const (
	InputFile  = jobs.InputFile // a named pipe: the job's standard input
	OutputFile = "output"       // the job's standard output and error
	ExitFile   = jobs.ExitFile  // the job's exit status, written when it ends
	MetaFile   = jobs.MetaFile  // the run's Recovery, for a stop or forget of a run no runner process holds
)

// StopGrace is how long stop waits after SIGTERM before it sends SIGKILL.
var StopGrace = jobs.DefaultStopGrace

// Recovery is the metadata a run persists through the host and
// executor.recover receives after a restart.
type Recovery = jobs.Recovery

// Config is a binding's executor config.
type Config struct {
	// Command is run with sh -c.
	Command string `json:"command"`
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
	if len(p.Config) == 0 || string(p.Config) == "null" {
		return DefaultCommand, nil
	}
	var c Config
	if err := json.Unmarshal(p.Config, &c); err != nil {
		return "", protocol.Errorf(protocol.CodeInvalid, "executor config: %v", err)
	}
	if strings.TrimSpace(c.Command) == "" {
		return DefaultCommand, nil
	}
	return c.Command, nil
}

// Extension returns the runner extension: a fresh value with its own
// table of jobs, ready for sdk.Serve or sdk.Attach. Its job model is
// protocol/sdk/jobs; what is runner's own is its one output file, which
// takes both streams, and its config.
func Extension() *sdk.Extension {
	x := jobs.New(jobs.Spec{Name: Name, Outputs: []string{OutputFile}, Command: command, StopGrace: &StopGrace})
	return &sdk.Extension{
		Manifest:   slices.Clone(manifest),
		Initialize: x.Initialize,
		Executors:  map[string]sdk.Executor{Name: x.Methods()},
	}
}
