package executortest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// Process is the executor as a child process: the test binary re-executed
// (see ServeChild) to serve it on its stdio, in a process group of its own
// as the host starts an extension.
type Process struct{ *sdktest.Process }

func startProcess(t *testing.T, x Executor, host *sdktest.Host) *Process {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), x.ChildEnv+"=serve")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sp, err := sdktest.Start(cmd, host)
	require.NoError(t, err)
	p := &Process{sp}
	t.Cleanup(p.Kill)
	return p
}

// Kill ends the executor process abruptly (SIGKILL to its group, as a
// crash or the host's last resort would) and waits for it. Killing it
// twice is harmless.
func (p *Process) Kill() {
	p.Conn.Close()
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.Done
}

// Mode is one way of reaching the executor.
type Mode struct {
	Name string
	// start reaches an executor (a fresh one each call: a restart).
	start func(t *testing.T, f *Fixture)
}

// Modes are the three ways: in process, over a pipe, as a child process.
var Modes = []Mode{
	{"inprocess", func(t *testing.T, f *Fixture) {
		c, err := sdk.Attach(f.X.Extension(), f.host)
		require.NoError(t, err)
		f.C = c
	}},
	{"pipe", func(t *testing.T, f *Fixture) {
		conn, done, err := sdktest.Pipe(context.Background(), f.X.Extension(), f.host)
		require.NoError(t, err)
		t.Cleanup(func() {
			conn.Close()
			<-done
		})
		f.C = conn
	}},
	{"process", func(t *testing.T, f *Fixture) {
		f.Proc = startProcess(t, f.X, f.host)
		f.C = f.Proc.Conn
	}},
}

// Fixture is an executor reached one way, with a fake host that keeps the
// recovery metadata each run persists.
type Fixture struct {
	X    Executor
	C    sdk.Caller
	Dir  string   // the executor directory
	Proc *Process // set in the process mode

	host    *sdktest.Host
	mu      sync.Mutex
	persist map[string]json.RawMessage
	refuse  error // persist_recovery answers this when set
}

// NewFixture starts and initializes x, reached as m says, over a fresh
// executor directory.
func NewFixture(t *testing.T, x Executor, m Mode) *Fixture {
	f := &Fixture{X: x, host: sdktest.New(), Dir: t.TempDir(), persist: map[string]json.RawMessage{}}
	f.host.Override = f.override
	f.Restart(t, m)
	t.Cleanup(f.killJobs)
	return f
}

func (f *Fixture) override(ctx context.Context, method string, params any) (any, bool, error) {
	if method != "execution.persist_recovery" {
		return nil, false, nil
	}
	p, err := protocol.DecodeParams[protocol.ExecutionPersistRecoveryParams](params)
	if err != nil {
		return nil, true, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return nil, true, f.refuse
	}
	f.persist[p.RunID] = append(json.RawMessage(nil), p.Recovery...)
	return protocol.ExecutionPersistRecoveryResult{}, true, nil
}

// Refuse makes the host answer every later persist_recovery with err.
func (f *Fixture) Refuse(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse = err
}

// Recovery is the metadata the host holds for runID, as persisted.
func (f *Fixture) Recovery(runID string) json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.persist[runID]
}

// Restart reaches a new executor over the same executor directory, as
// the host does after the extension restarted.
func (f *Fixture) Restart(t *testing.T, m Mode) {
	t.Helper()
	m.start(t, f)
	require.NoError(t, f.C.Call(Context(t), "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1},
		StateDir: t.TempDir(), ExecutorDirs: map[string]string{f.X.Name: f.Dir}}, nil))
}

// killJobs kills the process group of every job the test started, so a
// failing test leaves nothing behind.
func (f *Fixture) killJobs() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, raw := range f.persist {
		var rec Record
		if json.Unmarshal(raw, &rec) == nil && rec.PGID > 0 {
			KillGroup(rec.PGID)
		}
	}
}

// Run starts runID running command and returns the metadata it
// persisted, which the run's result must repeat.
func (f *Fixture) Run(t *testing.T, runID, command string) Record {
	t.Helper()
	var res protocol.ExecutorRunResult
	require.NoError(t, f.C.Call(Context(t), "executor.run", protocol.ExecutorRunParams{Executor: f.X.Name, RunID: runID,
		Work:      protocol.Work{ID: "work-" + runID, ScopeID: "team", Kind: "job", State: "running"},
		Execution: protocol.Execution{ID: "ex-" + runID, WorkID: "work-" + runID, Attempt: 1, Executor: f.X.Name, State: "running"},
		Config:    Config(command)}, &res))
	var rec Record
	require.NoError(t, json.Unmarshal(f.Recovery(runID), &rec), "the run persisted its recovery metadata")
	require.JSONEq(t, string(f.Recovery(runID)), string(res.Recovery))
	return rec
}

// Wait waits for runID to settle.
func (f *Fixture) Wait(t *testing.T, runID string) protocol.ExecutorWaitResult {
	t.Helper()
	var res protocol.ExecutorWaitResult
	require.NoError(t, f.C.Call(Context(t), "executor.wait", protocol.ExecutorWaitParams{Executor: f.X.Name, RunID: runID}, &res))
	return res
}

// Inject sends text to runID's job.
func (f *Fixture) Inject(t *testing.T, runID, text string) error {
	return f.C.Call(Context(t), "executor.inject", protocol.ExecutorInjectParams{Executor: f.X.Name, RunID: runID, Text: text}, nil)
}
