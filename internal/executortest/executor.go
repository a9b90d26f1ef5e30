package executortest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/procwatch"
)

// Executor is what the kit needs to know of the executor under test: what
// differs between the executors it serves.
type Executor struct {
	// Name is the executor's name in its manifest, and the argument of
	// "open-conduit extension-run <name>".
	Name string
	// Extension makes a fresh extension value serving the executor.
	Extension func() *sdk.Extension
	// MetaFile and InputFile are the names, in a run's directory, of its
	// persisted Record and of the job's input pipe.
	MetaFile, InputFile string
	// LiveOutputs are the output names executor.live lists for a running
	// job, in order; the first holds the job's standard output.
	LiveOutputs []string
	// ChildEnv is the environment variable that, set to "serve", makes
	// the test binary serve the executor on its stdio.
	ChildEnv string
	// StopGrace is the executor's grace between SIGTERM and SIGKILL, which
	// TestStop shortens for the executors it runs in process.
	StopGrace *time.Duration
}

// Record is the recovery metadata an executor persists for a run: the
// kit's own copy of the JSON shape both executors' Recovery types share.
type Record struct {
	RunID       string `json:"run_id"`
	ExecutionID string `json:"execution_id,omitempty"`
	WorkID      string `json:"work_id,omitempty"`
	Dir         string `json:"dir"`
	PID         int    `json:"pid"`
	PGID        int    `json:"pgid"`
	Start       uint64 `json:"start,omitempty"`
}

// Config is the executor config that runs command: {"command": …}.
func Config(command string) json.RawMessage {
	raw, err := json.Marshal(struct {
		Command string `json:"command"`
	}{command})
	if err != nil {
		panic(err) // a string always marshals
	}
	return raw
}

// PIDFile is where an executor the host started notes its pid in its
// state directory, so a test can crash it.
const PIDFile = "pid"

// ServeChild serves x and exits when the test binary was started as the
// executor's process: by the host, as "open-conduit extension-run <name>"
// would be (noting its pid in its state directory), or by a test with
// x.ChildEnv=serve. Otherwise it returns. A TestMain calls it first.
func ServeChild(x Executor) {
	var ext *sdk.Extension
	switch {
	case len(os.Args) == 3 && os.Args[1] == "extension-run" && os.Args[2] == x.Name:
		ext = x.Extension()
		init := ext.Initialize
		ext.Initialize = func(ctx context.Context, p protocol.InitializeParams) error {
			if err := os.WriteFile(filepath.Join(p.StateDir, PIDFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
				return err
			}
			return init(ctx, p)
		}
	case os.Getenv(x.ChildEnv) == "serve":
		ext = x.Extension()
	default:
		return
	}
	if err := sdk.Serve(ext); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Context is t's context bounded to a minute, so a hung call fails the
// test instead of the test binary's timeout.
func Context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Alive reports whether pid is a running (not zombie) process.
func Alive(pid int) bool { return procwatch.Running(pid, 0) }

// GroupEmpty reports whether no running process is left in group pgid.
func GroupEmpty(pgid int) bool { return !procwatch.GroupAlive(pgid) }

// KillGroup kills process group pgid outright.
func KillGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

// WaitGone waits for pid, which need not be the test's child (a job's
// parent was the executor, now gone), to exit, bounded by ctx.
func WaitGone(ctx context.Context, pid int) error { return procwatch.WaitExit(ctx, pid) }

// WriteInput writes a line to a job's input pipe directly, as nothing but
// the job itself holds it while no executor runs.
func (x Executor) WriteInput(rec Record, line string) error {
	f, err := os.OpenFile(filepath.Join(rec.Dir, x.InputFile), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(line + "\n")
	return err
}

// records reads the Record of every run under executorDir.
func (x Executor) records(executorDir string) ([]Record, error) {
	metas, err := filepath.Glob(filepath.Join(executorDir, "runs", "*", x.MetaFile))
	if err != nil {
		return nil, err
	}
	var recs []Record
	for _, path := range metas {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var rec Record
		if err := json.Unmarshal(data, &rec); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// KillAllJobs kills every job started under executorDir, so a failing
// test leaves nothing behind.
func (x Executor) KillAllJobs(executorDir string) {
	metas, _ := filepath.Glob(filepath.Join(executorDir, "runs", "*", x.MetaFile))
	for _, path := range metas {
		data, _ := os.ReadFile(path)
		var rec Record
		if json.Unmarshal(data, &rec) == nil && rec.PGID > 0 {
			KillGroup(rec.PGID)
		}
	}
}

// Manifest is the executor's manifest, parsed.
func (x Executor) Manifest(t *testing.T) *protocol.Manifest {
	m, err := protocol.ParseManifest(x.Extension().Manifest)
	if err != nil {
		t.Fatalf("the %s manifest: %v", x.Name, err)
	}
	return m
}
