package shell_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/shell"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

const childEnv = "SHELL_TEST_CHILD"

// pidFile is where the shell executor the host started notes its pid.
const pidFile = "pid"

func TestMain(m *testing.M) {
	// Run by the host as "open-conduit extension-run shell" would be,
	// leaving its pid in its state directory so a test can crash it.
	if len(os.Args) == 3 && os.Args[1] == "extension-run" && os.Args[2] == shell.Name {
		ext := shell.Extension()
		init := ext.Initialize
		ext.Initialize = func(ctx context.Context, p protocol.InitializeParams) error {
			if err := os.WriteFile(filepath.Join(p.StateDir, pidFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
				return err
			}
			return init(ctx, p)
		}
		if err := sdk.Serve(ext); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(childEnv) == "serve" {
		if err := sdk.Serve(shell.Extension()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// process is the executor as a child process: the test binary re-executed
// to serve shell.Extension on its stdio, in a process group of its own as
// the host starts an extension.
type process struct{ *sdktest.Process }

func startProcess(t *testing.T, host *sdktest.Host) *process {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=serve")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sp, err := sdktest.Start(cmd, host)
	require.NoError(t, err)
	p := &process{sp}
	t.Cleanup(p.kill)
	return p
}

// kill ends the executor process abruptly (SIGKILL to its group, as a crash
// or the host's last resort would) and waits for it. Killing it twice is
// harmless.
func (p *process) kill() {
	p.Conn.Close()
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.Done
}

// fixture is an executor reached one way, with a fake host that keeps the
// recovery metadata each run persists.
type fixture struct {
	c       sdk.Caller
	host    *sdktest.Host
	dir     string // the executor directory
	proc    *process
	mu      sync.Mutex
	persist map[string]json.RawMessage
	refuse  error // persist_recovery answers this when set
}

func (f *fixture) override(ctx context.Context, method string, params any) (any, bool, error) {
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

func (f *fixture) recovery(runID string) json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.persist[runID]
}

type mode struct {
	name string
	// start reaches an executor (a fresh one each call: a restart) over dir.
	start func(t *testing.T, f *fixture)
}

var modes = []mode{
	{"inprocess", func(t *testing.T, f *fixture) {
		c, err := sdk.Attach(shell.Extension(), f.host)
		require.NoError(t, err)
		f.c = c
	}},
	{"pipe", func(t *testing.T, f *fixture) {
		conn, done, err := sdktest.Pipe(context.Background(), shell.Extension(), f.host)
		require.NoError(t, err)
		t.Cleanup(func() {
			conn.Close()
			<-done
		})
		f.c = conn
	}},
	{"process", func(t *testing.T, f *fixture) {
		f.proc = startProcess(t, f.host)
		f.c = f.proc.Conn
	}},
}

// newFixture starts and initializes an executor over a fresh executor
// directory.
func newFixture(t *testing.T, m mode) *fixture {
	f := &fixture{host: sdktest.New(), dir: t.TempDir(), persist: map[string]json.RawMessage{}}
	f.host.Override = f.override
	f.restart(t, m)
	t.Cleanup(func() { f.killJobs() })
	return f
}

// restart reaches a new executor over the same executor directory, as the
// host does after the extension restarted.
func (f *fixture) restart(t *testing.T, m mode) {
	t.Helper()
	m.start(t, f)
	require.NoError(t, f.c.Call(testContext(t), "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1},
		StateDir: t.TempDir(), ExecutorDirs: map[string]string{shell.Name: f.dir}}, nil))
}

// killJobs kills the process group of every job the test started, so a
// failing test leaves nothing behind.
func (f *fixture) killJobs() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, raw := range f.persist {
		var rec shell.Recovery
		if json.Unmarshal(raw, &rec) == nil && rec.PGID > 0 {
			_ = syscall.Kill(-rec.PGID, syscall.SIGKILL)
		}
	}
}

func (f *fixture) run(t *testing.T, runID, command string) shell.Recovery {
	t.Helper()
	config, err := json.Marshal(shell.Config{Command: command})
	require.NoError(t, err)
	var res protocol.ExecutorRunResult
	require.NoError(t, f.c.Call(testContext(t), "executor.run", protocol.ExecutorRunParams{Executor: shell.Name, RunID: runID,
		Work:      protocol.Work{ID: "work-" + runID, ScopeID: "team", Kind: "job", State: "running"},
		Execution: protocol.Execution{ID: "ex-" + runID, WorkID: "work-" + runID, Attempt: 1, Executor: shell.Name, State: "running"},
		Config:    config}, &res))
	var rec shell.Recovery
	require.NoError(t, json.Unmarshal(f.recovery(runID), &rec), "the run persisted its recovery metadata")
	require.JSONEq(t, string(f.recovery(runID)), string(res.Recovery))
	return rec
}

func (f *fixture) wait(t *testing.T, runID string) protocol.ExecutorWaitResult {
	t.Helper()
	var res protocol.ExecutorWaitResult
	require.NoError(t, f.c.Call(testContext(t), "executor.wait", protocol.ExecutorWaitParams{Executor: shell.Name, RunID: runID}, &res))
	return res
}

func (f *fixture) inject(t *testing.T, runID, text string) error {
	return f.c.Call(testContext(t), "executor.inject", protocol.ExecutorInjectParams{Executor: shell.Name, RunID: runID, Text: text}, nil)
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(data)
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || len(s) < i+3 || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// groupEmpty reports whether no running process is left in group pgid.
func groupEmpty(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) != nil
	}
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(data, ')')
		var state string
		var ppid, pgrp int
		if _, err := fmt.Sscan(string(data[i+1:]), &state, &ppid, &pgrp); err == nil && pgrp == pgid && state != "Z" && state != "X" {
			return false
		}
	}
	return true
}
