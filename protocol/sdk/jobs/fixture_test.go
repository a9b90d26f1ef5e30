package jobs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/jobs"
	"github.com/open-conduit/open-conduit/protocol/sdk/procwatch"
)

// The jobs the tests run. Each blocks on its input or on a signal until
// the test says how it ends, so no test waits on time.
const (
	// exitInput exits with the status it is sent.
	exitInput = `read code; exit "$code"`
	// echoInput ends with the line it was sent.
	echoInput = `read line; echo "got $line"`
	// readySignal reports on $SYNC that it runs, then waits for one line.
	readySignal = `echo ready > "$SYNC"; read line`
	// groupWithStubbornChild starts a second process in the job's group
	// that ignores SIGTERM and outlives the job's leader, and reports its
	// pid on $SYNC. It reads the job's input pipe, opened for reading and
	// writing so that it never reads end of file (a background command's
	// standard input is /dev/null).
	groupWithStubbornChild = `sh -c 'trap "" TERM; echo $$ > "$SYNC"; exec cat <>` + jobs.InputFile + ` >/dev/null' & wait`
)

// executorName is the executor the tests' Spec describes.
const executorName = "testjob"

// fakeHost is the host side of the calls the job model makes: it keeps
// what execution.persist_recovery was given, or refuses it.
type fakeHost struct {
	mu        sync.Mutex
	persisted map[string]json.RawMessage
	refuse    error
}

func newFakeHost() *sdk.Host {
	return sdk.NewHost(&fakeHost{persisted: map[string]json.RawMessage{}}, nil)
}

func (h *fakeHost) Call(ctx context.Context, method string, params, result any) error {
	if method != "execution.persist_recovery" {
		return protocol.Errorf(protocol.CodeMethodNotFound, "the test host serves no %s", method)
	}
	p, ok := params.(protocol.ExecutionPersistRecoveryParams)
	if !ok {
		return protocol.Errorf(protocol.CodeInvalid, "params of type %T", params)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refuse != nil {
		return h.refuse
	}
	h.persisted[p.RunID] = append(json.RawMessage(nil), p.Recovery...)
	return nil
}

func (h *fakeHost) recovery(runID string) json.RawMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.persisted[runID]
}

// fixture is one executor directory and the executor process serving it;
// restart replaces the executor with a fresh one over the same directory,
// as a restarted executor process finds it.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	dir     string // the executor's directory
	outputs []string
	fake    *fakeHost
	host    *sdk.Host
	grace   time.Duration // the Spec's stop grace, read at each stop
	reports atomic.Int32  // how many times the Spec's Report ran
	x       sdk.Executor
}

// config is the binding config the Spec reads the command from.
type config struct {
	Command string `json:"command"`
	Refuse  string `json:"refuse,omitempty"`
}

func newFixture(t *testing.T, outputs ...string) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	fake := &fakeHost{persisted: map[string]json.RawMessage{}}
	f := &fixture{t: t, ctx: ctx, dir: filepath.Join(t.TempDir(), "executors", executorName), outputs: outputs,
		fake: fake, host: sdk.NewHost(fake, nil), grace: time.Minute}
	f.restart()
	return f
}

// spec is the Spec of the tests' executor: the command comes from the
// config; its Report answers the run's first output file.
func (f *fixture) spec() jobs.Spec {
	return jobs.Spec{
		Name:    executorName,
		Outputs: f.outputs,
		Command: func(p protocol.ExecutorRunParams) (string, error) {
			var c config
			if err := json.Unmarshal(p.Config, &c); err != nil {
				return "", protocol.Errorf(protocol.CodeInvalid, "config: %v", err)
			}
			if c.Refuse != "" {
				return "", protocol.Errorf(protocol.CodeInvalid, "%s", c.Refuse)
			}
			if c.Command == "" {
				return jobs.DefaultCommand, nil
			}
			return c.Command, nil
		},
		StopGrace: &f.grace,
		Report: func(ctx context.Context, host *sdk.Host, runID, dir string) json.RawMessage {
			n := f.reports.Add(1)
			out, _ := os.ReadFile(filepath.Join(dir, f.outputs[0]))
			raw, _ := json.Marshal(map[string]any{"report": n, "output": string(out)})
			return raw
		},
	}
}

// restart gives the directory a new executor, knowing no run.
func (f *fixture) restart() {
	f.t.Helper()
	x := jobs.New(f.spec())
	require.NoError(f.t, x.Initialize(f.ctx, protocol.InitializeParams{ExecutorDirs: map[string]string{executorName: f.dir}}))
	f.x = x.Methods()
}

func commandConfig(command string) json.RawMessage {
	raw, err := json.Marshal(config{Command: command})
	if err != nil {
		panic(err) // a string always marshals
	}
	return raw
}

// start runs command as runID with env as its environment layer and
// returns what run answered. Whatever is left of the job's group is
// killed when the test ends.
func (f *fixture) start(runID, command string, env map[string]string) (jobs.Recovery, error) {
	f.t.Helper()
	res, err := f.x.Run(f.ctx, f.host, protocol.ExecutorRunParams{Executor: executorName, RunID: runID,
		Work: protocol.Work{ID: "work-" + runID}, Execution: protocol.Execution{ID: "exec-" + runID},
		Config: commandConfig(command), Env: env})
	if err != nil {
		return jobs.Recovery{}, err
	}
	var rec jobs.Recovery
	require.NoError(f.t, json.Unmarshal(res.Recovery, &rec), "run answers its Recovery")
	f.t.Cleanup(func() { killGroup(rec.PGID) })
	return rec, nil
}

// run is start that must succeed.
func (f *fixture) run(runID, command string, env map[string]string) jobs.Recovery {
	f.t.Helper()
	rec, err := f.start(runID, command, env)
	require.NoError(f.t, err)
	return rec
}

func (f *fixture) wait(runID string) protocol.ExecutorWaitResult {
	f.t.Helper()
	res, err := f.x.Wait(f.ctx, f.host, protocol.ExecutorWaitParams{Executor: executorName, RunID: runID})
	require.NoError(f.t, err)
	return res
}

func (f *fixture) inject(runID, text string) error {
	_, err := f.x.Inject(f.ctx, f.host, protocol.ExecutorInjectParams{Executor: executorName, RunID: runID, Text: text})
	return err
}

func (f *fixture) stop(runID string) protocol.ExecutorStopResult {
	f.t.Helper()
	res, err := f.x.Stop(f.ctx, f.host, protocol.ExecutorStopParams{Executor: executorName, RunID: runID, Epoch: 1})
	require.NoError(f.t, err)
	return res
}

func (f *fixture) recover(runID string, meta json.RawMessage, executionID string) error {
	_, err := f.x.Recover(f.ctx, f.host, protocol.ExecutorRecoverParams{Executor: executorName, RunID: runID,
		Execution: protocol.Execution{ID: executionID}, Recovery: meta})
	return err
}

func (f *fixture) forget(runID string) error {
	_, err := f.x.Forget(f.ctx, f.host, protocol.ExecutorForgetParams{Executor: executorName, RunID: runID})
	return err
}

// output is the content of one of a run's output files.
func output(t *testing.T, rec jobs.Recovery, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(rec.Dir, name))
	require.NoError(t, err)
	return string(data)
}

// syncPipe is a named pipe a job writes one line to ($SYNC in its
// environment) and the test reads it from: the job's own notification
// that it reached a point, with no polling.
type syncPipe struct {
	t    *testing.T
	path string
}

func newSyncPipe(t *testing.T) syncPipe {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sync")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	return syncPipe{t: t, path: path}
}

func (s syncPipe) env() map[string]string { return map[string]string{"SYNC": s.path} }

// line reads the line the job writes, bounded by ctx: opening a named
// pipe for reading blocks until its writer opens it.
func (s syncPipe) line(ctx context.Context) string {
	s.t.Helper()
	type read struct {
		line string
		err  error
	}
	got := make(chan read, 1)
	go func() {
		f, err := os.Open(s.path)
		if err != nil {
			got <- read{err: err}
			return
		}
		defer f.Close()
		line, err := bufio.NewReader(f).ReadString('\n')
		got <- read{line: strings.TrimSpace(line), err: err}
	}()
	select {
	case r := <-got:
		require.NoError(s.t, r.err, "the job's line on %s", s.path)
		return r.line
	case <-ctx.Done():
		// Unblock the reader's open, so its goroutine ends.
		if w, err := os.OpenFile(s.path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		s.t.Fatalf("the job wrote nothing on %s: %v", s.path, ctx.Err())
		return ""
	}
}

// pid reads a pid the job reports.
func (s syncPipe) pid(ctx context.Context) int {
	s.t.Helper()
	line := s.line(ctx)
	pid, err := strconv.Atoi(line)
	require.NoError(s.t, err, "a pid, not %q", line)
	return pid
}

// groupEmpty reports whether no process of group pgid still runs.
func groupEmpty(pgid int) bool { return !procwatch.GroupAlive(pgid) }

// running reports whether pid is a process that runs (not a zombie).
func running(pid int) bool { return procwatch.Running(pid, 0) }

// killGroup kills what is left of group pgid.
func killGroup(pgid int) {
	if pgid > 0 && procwatch.GroupAlive(pgid) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// killLeaderOnly kills the job's leader and nothing else of its group,
// and waits until it is gone: a job ended without recording its status.
func killLeaderOnly(t *testing.T, ctx context.Context, rec jobs.Recovery) {
	t.Helper()
	require.NoError(t, syscall.Kill(rec.PID, syscall.SIGKILL))
	require.NoError(t, procwatch.WaitExit(ctx, rec.PID))
}

// withDir is rec naming another directory.
func withDir(rec jobs.Recovery, dir string) jobs.Recovery { rec.Dir = dir; return rec }

func marshal(t *testing.T, v any) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return raw
}

// describe names a Recovery in a failure message.
func describe(rec jobs.Recovery) string {
	return fmt.Sprintf("run %s: pid %d, group %d, %s", rec.RunID, rec.PID, rec.PGID, rec.Dir)
}
