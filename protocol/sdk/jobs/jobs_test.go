package jobs_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk/jobs"
	"github.com/open-conduit/open-conduit/protocol/sdk/procwatch"
)

// TestNewRefusesAnIncompleteSpec: a Spec without a name, a command, or
// one or two outputs is a programming error.
func TestNewRefusesAnIncompleteSpec(t *testing.T) {
	command := func(protocol.ExecutorRunParams) (string, error) { return "true", nil }
	for name, spec := range map[string]jobs.Spec{
		"no name":       {Outputs: []string{"out"}, Command: command},
		"no command":    {Name: executorName, Outputs: []string{"out"}},
		"no output":     {Name: executorName, Command: command},
		"three outputs": {Name: executorName, Outputs: []string{"a", "b", "c"}, Command: command},
	} {
		assert.Panics(t, func() { jobs.New(spec) }, name)
	}
	assert.NotPanics(t, func() { jobs.New(jobs.Spec{Name: executorName, Outputs: []string{"out"}, Command: command}) })
}

// TestInitializeChoosesTheExecutorDirectory: the directory initialize
// names for the executor, else executors/<name> of the state directory;
// neither is refused invalid.
func TestInitializeChoosesTheExecutorDirectory(t *testing.T) {
	ctx := t.Context()
	command := func(protocol.ExecutorRunParams) (string, error) { return "exit 0", nil }
	spec := jobs.Spec{Name: executorName, Outputs: []string{"out"}, Command: command}
	host := newFakeHost()
	runIn := func(p protocol.InitializeParams) string {
		t.Helper()
		x := jobs.New(spec)
		require.NoError(t, x.Initialize(ctx, p))
		res, err := x.Methods().Run(ctx, host, protocol.ExecutorRunParams{Executor: executorName, RunID: "run-1"})
		require.NoError(t, err)
		var rec jobs.Recovery
		require.NoError(t, json.Unmarshal(res.Recovery, &rec))
		_, err = x.Methods().Wait(ctx, host, protocol.ExecutorWaitParams{Executor: executorName, RunID: "run-1"})
		require.NoError(t, err)
		return filepath.Dir(filepath.Dir(rec.Dir))
	}

	named, state := t.TempDir(), t.TempDir()
	assert.Equal(t, named, runIn(protocol.InitializeParams{StateDir: state, ExecutorDirs: map[string]string{executorName: named}}),
		"the directory initialize names for the executor")
	assert.Equal(t, filepath.Join(state, "executors", executorName), runIn(protocol.InitializeParams{StateDir: state,
		ExecutorDirs: map[string]string{"another": named}}), "else executors/<name> of the state directory")

	err := jobs.New(spec).Initialize(ctx, protocol.InitializeParams{ExecutorDirs: map[string]string{"another": named}})
	assert.ErrorIs(t, err, protocol.ErrInvalid, "no directory at all")
}

// TestRunStartsADetachedJobInItsRunsDirectory: a run's job leads a process
// group of its own, runs in runs/<digest of the run id> of the executor's
// directory with its environment layer (the toolbelt's variables winning
// over it), and its Recovery is persisted through the host and kept in
// that directory, the same bytes run answers. The exit status lands there
// when the job ends.
func TestRunStartsADetachedJobInItsRunsDirectory(t *testing.T) {
	f := newFixture(t, "out")
	res, err := f.x.Run(f.ctx, f.host, protocol.ExecutorRunParams{Executor: executorName, RunID: "run/1 with any character: ü",
		Work: protocol.Work{ID: "work-1"}, Execution: protocol.Execution{ID: "exec-1"},
		Config:   commandConfig(`echo "$PWD|$LAYER|$` + protocol.ToolbeltTokenEnv + `"; echo to-stderr >&2; read code; exit "$code"`),
		Env:      map[string]string{"LAYER": "from the layer", protocol.ToolbeltTokenEnv: "forged by the layer"},
		Endpoint: protocol.ToolbeltUnixScheme + "/run/toolbelt.sock", Token: "the run's token"})
	require.NoError(t, err)
	var rec jobs.Recovery
	require.NoError(t, json.Unmarshal(res.Recovery, &rec))
	t.Cleanup(func() { killGroup(rec.PGID) })

	want := filepath.Join(f.dir, "runs", runKey("run/1 with any character: ü"))
	assert.Equal(t, want, rec.Dir, "the run's directory is named by a digest of its id")
	assert.Equal(t, "run/1 with any character: ü", rec.RunID)
	assert.Equal(t, "exec-1", rec.ExecutionID)
	assert.Equal(t, "work-1", rec.WorkID)
	assert.NotZero(t, rec.Start, "the leader's start time tells it from a later process with its pid")

	pgid, err := syscall.Getpgid(rec.PID)
	require.NoError(t, err)
	assert.Equal(t, rec.PID, pgid, "the job leads a process group of its own")
	assert.Equal(t, rec.PID, rec.PGID)
	assert.NotEqual(t, syscall.Getpgrp(), pgid, "the job is detached from the executor's group")

	assert.JSONEq(t, string(res.Recovery), string(f.fake.recovery(rec.RunID)), "persisted through the host as run answers it")
	onDisk, err := os.ReadFile(filepath.Join(rec.Dir, jobs.MetaFile))
	require.NoError(t, err)
	assert.JSONEq(t, string(res.Recovery), string(onDisk), "kept in the run's directory")
	info, err := os.Stat(filepath.Join(rec.Dir, jobs.InputFile))
	require.NoError(t, err)
	assert.Equal(t, fs.ModeNamedPipe, info.Mode().Type(), "the job's input is a named pipe")
	_, err = os.Stat(filepath.Join(rec.Dir, jobs.ExitFile))
	assert.ErrorIs(t, err, fs.ErrNotExist, "no exit status while the job runs")

	require.NoError(t, f.inject(rec.RunID, "7"))
	assert.Equal(t, 7, f.wait(rec.RunID).ExitCode)
	assert.Equal(t, want+"|from the layer|the run's token\nto-stderr\n", output(t, rec, "out"),
		"one output takes standard output and error; the toolbelt's variables win over the layer's")
	status, err := os.ReadFile(filepath.Join(rec.Dir, jobs.ExitFile))
	require.NoError(t, err)
	assert.Equal(t, "7\n", string(status), "the job recorded its exit status in its directory")
}

// TestTwoOutputsAreStdoutThenStderr: with two outputs the job's standard
// output and error go to their own files, which live answers in order,
// each cut to the tail asked for.
func TestTwoOutputsAreStdoutThenStderr(t *testing.T) {
	f := newFixture(t, "stdout.log", "stderr.log")
	sync := newSyncPipe(t)
	rec := f.run("run-1", `echo out-line; echo err-line >&2; `+readySignal, sync.env())
	require.Equal(t, "ready", sync.line(f.ctx))

	live, err := f.x.Live(f.ctx, f.host, protocol.ExecutorLiveParams{Executor: executorName, RunID: "run-1"})
	require.NoError(t, err)
	require.Len(t, live.Outputs, 2)
	assert.Equal(t, "stdout.log", live.Outputs[0].Name)
	assert.Equal(t, "out-line\n", string(live.Outputs[0].Tail))
	assert.Equal(t, "stderr.log", live.Outputs[1].Name)
	assert.Equal(t, "err-line\n", string(live.Outputs[1].Tail))

	live, err = f.x.Live(f.ctx, f.host, protocol.ExecutorLiveParams{Executor: executorName, RunID: "run-1", Tail: 5})
	require.NoError(t, err)
	assert.Equal(t, "line\n", string(live.Outputs[0].Tail), "the last 5 bytes")
	assert.Equal(t, int64(len("out-line\n")), live.Outputs[0].Size, "the size is the whole output's")

	require.NoError(t, f.inject("run-1", "done"))
	assert.Equal(t, "succeeded", f.wait("run-1").State)
	assert.Equal(t, "out-line\n", output(t, rec, "stdout.log"))
	assert.Equal(t, "err-line\n", output(t, rec, "stderr.log"))

	_, err = f.x.Live(f.ctx, f.host, protocol.ExecutorLiveParams{Executor: executorName, RunID: "run-1"})
	assert.ErrorIs(t, err, protocol.ErrNotLive, "a settled run is not live")
	_, err = f.x.Live(f.ctx, f.host, protocol.ExecutorLiveParams{Executor: executorName, RunID: "unknown"})
	assert.ErrorIs(t, err, protocol.ErrNotLive, "nor is one this process does not know")
}

// TestRunRefusals: the Spec's refusal of a config comes back as it is, a
// run needs an id, and a run id starts once.
func TestRunRefusals(t *testing.T) {
	f := newFixture(t, "out")
	_, err := f.x.Run(f.ctx, f.host, protocol.ExecutorRunParams{Executor: executorName, RunID: "run-1",
		Config: marshal(t, config{Refuse: "no such command"})})
	assert.ErrorIs(t, err, protocol.ErrInvalid)
	assert.ErrorContains(t, err, "no such command")
	_, err = f.start("", exitInput, nil)
	assert.ErrorIs(t, err, protocol.ErrInvalid, "a run without an id")

	f.run("run-1", exitInput, nil)
	_, err = f.start("run-1", exitInput, nil)
	assert.ErrorIs(t, err, protocol.ErrConflict, "a run id already started")
	require.NoError(t, f.inject("run-1", "0"))
	assert.Equal(t, "succeeded", f.wait("run-1").State, "the first run is untouched")
}

// TestWaitReportsHowTheJobEnded: exit status 0 succeeded, another failed
// with it, a job whose leader died before recording a status failed with
// no exit code; the default command exits with what it is sent.
func TestWaitReportsHowTheJobEnded(t *testing.T) {
	f := newFixture(t, "out")
	f.run("zero", exitInput, nil)
	f.run("three", exitInput, nil)
	f.run("default", "", nil)
	killed := f.run("killed", exitInput, nil)

	require.NoError(t, f.inject("zero", "0"))
	require.NoError(t, f.inject("three", "3"))
	require.NoError(t, f.inject("default", "5"))
	killLeaderOnly(t, f.ctx, killed)

	assert.Equal(t, protocol.ExecutorWaitResult{State: "succeeded"}, withoutOutput(f.wait("zero")))
	assert.Equal(t, protocol.ExecutorWaitResult{State: "failed", ExitCode: 3, Error: "exit status 3"}, withoutOutput(f.wait("three")))
	assert.Equal(t, protocol.ExecutorWaitResult{State: "failed", ExitCode: 5, Error: "exit status 5"}, withoutOutput(f.wait("default")),
		"the default command exits with the status it is sent")
	res := f.wait("killed")
	assert.Equal(t, "failed", res.State)
	assert.Zero(t, res.ExitCode)
	assert.Contains(t, res.Error, "without recording its exit status")

	_, err := f.x.Wait(f.ctx, f.host, protocol.ExecutorWaitParams{Executor: executorName, RunID: "unknown"})
	assert.ErrorIs(t, err, protocol.ErrNotFound)
}

func withoutOutput(r protocol.ExecutorWaitResult) protocol.ExecutorWaitResult {
	r.Output = nil
	return r
}

// TestWaitKeepsTheResult: a cancelled wait ends the observation, not the
// job; a settled run's result, the Spec's Report with it, is computed once
// and answered to every later wait.
func TestWaitKeepsTheResult(t *testing.T) {
	f := newFixture(t, "out")
	rec := f.run("run-1", echoInput, nil)

	cancelled, cancel := context.WithCancel(f.ctx)
	cancel()
	_, err := f.x.Wait(cancelled, f.host, protocol.ExecutorWaitParams{Executor: executorName, RunID: "run-1"})
	assert.ErrorIs(t, err, context.Canceled, "a cancelled wait answers cancelled, never a result")
	assert.True(t, running(rec.PID), "the job goes on")

	require.NoError(t, f.inject("run-1", "hello"))
	first := f.wait("run-1")
	assert.Equal(t, "succeeded", first.State)
	assert.JSONEq(t, `{"report":1,"output":"got hello\n"}`, string(first.Output))
	second := f.wait("run-1")
	assert.Equal(t, first, second, "a second wait answers the first one's result")
	assert.Equal(t, int32(1), f.reports.Load(), "the Report ran once for the run")
}

// TestInjectFeedsTheJobsInput: text is one line and events one JSON line
// each; nothing to inject is invalid, a settled run's input is closed.
func TestInjectFeedsTheJobsInput(t *testing.T) {
	f := newFixture(t, "out")
	rec := f.run("run-1", `read a; read b; read c; printf '%s\n' "$a" "$b" "$c"`, nil)
	_, err := f.x.Inject(f.ctx, f.host, protocol.ExecutorInjectParams{Executor: executorName, RunID: "run-1"})
	assert.ErrorIs(t, err, protocol.ErrInvalid, "nothing to inject")
	_, err = f.x.Inject(f.ctx, f.host, protocol.ExecutorInjectParams{Executor: executorName, RunID: "run-1", Text: "text line\n",
		Events: []protocol.Event{{ID: "ev-1", Family: "notes.note", Root: "ev-1"}, {ID: "ev-2", Family: "notes.note", Root: "ev-2"}}})
	require.NoError(t, err)
	assert.Equal(t, "succeeded", f.wait("run-1").State)
	lines := output(t, rec, "out")
	var a, b struct {
		ID string `json:"id"`
	}
	parts := strings.Split(strings.TrimSuffix(lines, "\n"), "\n")
	require.Len(t, parts, 3, lines)
	assert.Equal(t, "text line", parts[0], "the text, its trailing newline not doubled")
	require.NoError(t, json.Unmarshal([]byte(parts[1]), &a))
	require.NoError(t, json.Unmarshal([]byte(parts[2]), &b))
	assert.Equal(t, "ev-1", a.ID)
	assert.Equal(t, "ev-2", b.ID)

	assert.ErrorIs(t, f.inject("run-1", "late"), protocol.ErrConflict, "a settled run takes no input")
	assert.ErrorIs(t, f.inject("unknown", "x"), protocol.ErrNotFound)
}

// TestInterruptSignalsTheGroup: interrupt sends SIGINT to the job's
// group, and the status it ended with is recorded; a settled run's
// interrupt is answered with nothing to do.
func TestInterruptSignalsTheGroup(t *testing.T) {
	f := newFixture(t, "out")
	f.run("run-1", exitInput, nil)
	_, err := f.x.Interrupt(f.ctx, f.host, protocol.ExecutorInterruptParams{Executor: executorName, RunID: "run-1"})
	require.NoError(t, err)
	res := f.wait("run-1")
	assert.Equal(t, "failed", res.State)
	assert.Equal(t, 130, res.ExitCode, "SIGINT ended the command (128+2) and the job recorded it")

	_, err = f.x.Interrupt(f.ctx, f.host, protocol.ExecutorInterruptParams{Executor: executorName, RunID: "run-1"})
	assert.NoError(t, err, "a settled run")
	_, err = f.x.Interrupt(f.ctx, f.host, protocol.ExecutorInterruptParams{Executor: executorName, RunID: "unknown"})
	assert.ErrorIs(t, err, protocol.ErrNotFound)
}

// TestStopEndsTheWholeGroup: stop answers stopped only once no process of
// the job's group is left: SIGTERM for a job that heeds it, then SIGKILL
// after the grace for a process of the group that ignores SIGTERM; the
// run settles stopped.
func TestStopEndsTheWholeGroup(t *testing.T) {
	f := newFixture(t, "out")

	// A job that heeds SIGTERM ends within the grace (a minute here): no
	// SIGKILL.
	heeds := f.run("heeds", exitInput, nil)
	res := f.stop("heeds")
	assert.True(t, res.Stopped, res.Evidence)
	assert.NotContains(t, res.Evidence, "SIGKILL")
	assert.True(t, groupEmpty(heeds.PGID), "stop answered while the group runs: %s", describe(heeds))
	assert.Equal(t, protocol.ExecutorWaitResult{State: "stopped", Error: "stopped", ExitCode: 143}, withoutOutput(f.wait("heeds")),
		"settled stopped, with the status SIGTERM left")

	// A second process of the group ignores SIGTERM.
	f.grace = 0 // read at each stop
	sync := newSyncPipe(t)
	stubborn := f.run("stubborn", groupWithStubbornChild, sync.env())
	child := sync.pid(f.ctx)
	require.True(t, running(child))
	childGroup, err := syscall.Getpgid(child)
	require.NoError(t, err)
	require.Equal(t, stubborn.PGID, childGroup, "the child is in the job's group")

	res = f.stop("stubborn")
	assert.True(t, res.Stopped, res.Evidence)
	assert.Contains(t, res.Evidence, "SIGTERM, then SIGKILL")
	assert.False(t, running(child), "the child that ignored SIGTERM is gone")
	assert.True(t, groupEmpty(stubborn.PGID), "stop answered while the group runs: %s", describe(stubborn))
	assert.Equal(t, "stopped", f.wait("stubborn").State)

	// Stopping a stopped run again finds nothing left.
	res = f.stop("stubborn")
	assert.True(t, res.Stopped, res.Evidence)
}

// TestStopOfARunNoProcessHolds: a restarted executor stops a run it never
// recovered from the Recovery the run's directory keeps; a run it has no
// directory of started nothing here.
func TestStopOfARunNoProcessHolds(t *testing.T) {
	f := newFixture(t, "out")
	rec := f.run("run-1", exitInput, nil)
	f.restart()
	_, err := f.x.Wait(f.ctx, f.host, protocol.ExecutorWaitParams{Executor: executorName, RunID: "run-1"})
	require.ErrorIs(t, err, protocol.ErrNotFound, "the new executor holds no run")

	res := f.stop("run-1")
	assert.True(t, res.Stopped, res.Evidence)
	assert.True(t, groupEmpty(rec.PGID), "stop answered while the group runs: %s", describe(rec))

	res = f.stop("never-started")
	assert.True(t, res.Stopped)
	assert.Contains(t, res.Evidence, "no job")
}

// TestPersistRefusalLeavesNothingRunning: when the host refuses to persist
// a run's Recovery, run answers the refusal as it is, and nothing of the
// job keeps running.
func TestPersistRefusalLeavesNothingRunning(t *testing.T) {
	f := newFixture(t, "out")
	f.fake.refuse = protocol.Errorf(protocol.CodeConflict, "the lease moved on")
	_, err := f.start("run-1", exitInput, nil)
	require.ErrorIs(t, err, protocol.ErrConflict, "the host's refusal comes back as it is")
	raw, err := os.ReadFile(filepath.Join(f.dir, "runs", runKey("run-1"), jobs.MetaFile))
	require.NoError(t, err)
	var rec jobs.Recovery
	require.NoError(t, json.Unmarshal(raw, &rec))
	t.Cleanup(func() { killGroup(rec.PGID) })
	assert.True(t, groupEmpty(rec.PGID), "the job of a run the host refused still runs: %s", describe(rec))
}

// runKey is the name of a run's directory: the first 12 bytes of the
// SHA-256 of its id, in hex (its id may hold any character).
func runKey(runID string) string {
	sum := sha256.Sum256([]byte(runID))
	return hex.EncodeToString(sum[:12])
}

// TestRecoverAdoptsUnderANewRunID: a restarted executor adopts, under the
// run ID the host gives it, a job still running (watched again: its end
// is reported) and a job that ended and recorded its status meanwhile.
func TestRecoverAdoptsUnderANewRunID(t *testing.T) {
	f := newFixture(t, "out")
	alive := f.run("alive", echoInput, nil)
	ended := f.run("ended", exitInput, nil)
	f.restart()

	// While no executor holds it, one job ends and records its status.
	require.NoError(t, writeInput(ended, "4"))
	require.NoError(t, waitExit(f, ended))

	require.NoError(t, f.recover("adopt-alive", f.fake.recovery("alive"), "exec-alive"))
	require.NoError(t, f.recover("adopt-alive", f.fake.recovery("alive"), "exec-alive"), "a run already adopted")
	require.NoError(t, f.inject("adopt-alive", "after the restart"))
	assert.Equal(t, "succeeded", f.wait("adopt-alive").State, "the adopted job's end is seen")
	assert.Equal(t, "got after the restart\n", output(t, alive, "out"))

	require.NoError(t, f.recover("adopt-ended", f.fake.recovery("ended"), "exec-ended"))
	res := f.wait("adopt-ended")
	assert.Equal(t, "failed", res.State)
	assert.Equal(t, 4, res.ExitCode, "the status the job recorded on disk")
}

// writeInput writes a line to a job's input pipe directly, as nothing but
// the job holds it while no executor runs.
func writeInput(rec jobs.Recovery, line string) error {
	f, err := os.OpenFile(filepath.Join(rec.Dir, jobs.InputFile), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(line + "\n")
	return err
}

// waitExit waits for the job's leader to end, as no executor watches it.
func waitExit(f *fixture, rec jobs.Recovery) error { return procwatch.WaitExit(f.ctx, rec.PID) }

// TestRecoverRefusesWhatItDidNotWrite: metadata recover cannot use, that
// names any directory but its run's own under the runs directory, that
// differs from what that directory records, or that is another attempt's,
// is not_adoptable: a forged Recovery never points stop or forget at
// files or processes the executor does not own. Its own is adopted.
func TestRecoverRefusesWhatItDidNotWrite(t *testing.T) {
	f := newFixture(t, "out")
	rec := f.run("real", exitInput, nil)
	runs := filepath.Join(f.dir, "runs")

	// Whoever forges the metadata may also write where it points: each
	// forged directory that can be made holds a recovery.json matching the
	// forged metadata, so that only the check of the directory refuses it.
	forge := func(r jobs.Recovery) json.RawMessage {
		t.Helper()
		raw := marshal(t, r)
		require.NoError(t, os.MkdirAll(r.Dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(r.Dir, jobs.MetaFile), raw, 0o600))
		return raw
	}
	// The right name for run "linked", made a link out of the runs
	// directory.
	linked := rec
	linked.RunID = "linked"
	linked.Dir = filepath.Join(runs, runKey("linked"))
	require.NoError(t, os.Symlink(t.TempDir(), linked.Dir))
	anotherPID := rec
	anotherPID.PID, anotherPID.PGID, anotherPID.Start = os.Getpid(), syscall.Getpgrp(), 0

	forged := map[string]json.RawMessage{
		"none":                            nil,
		"not JSON":                        json.RawMessage(`{"run_id":`),
		"no process":                      marshal(t, jobs.Recovery{RunID: "real", Dir: rec.Dir}),
		"elsewhere":                       forge(withDir(rec, filepath.Join(t.TempDir(), "elsewhere"))),
		"through dot-dot":                 forge(withDir(rec, runs+"/../../escaped")),
		"another run's directory":         forge(withDir(rec, filepath.Join(runs, runKey("another")))),
		"linked out of the runs":          forge(linked),
		"unclean":                         marshal(t, withDir(rec, runs+"/./"+filepath.Base(rec.Dir))),
		"relative":                        marshal(t, withDir(rec, filepath.Join("runs", filepath.Base(rec.Dir)))),
		"its directory, another process":  marshal(t, anotherPID),
		"its directory, another run's id": marshal(t, jobs.Recovery{RunID: "another", Dir: rec.Dir, PID: rec.PID, PGID: rec.PGID, Start: rec.Start}),
	}
	f.restart()
	for name, meta := range forged {
		err := f.recover("adopt", meta, "")
		assert.ErrorIs(t, err, protocol.ErrNotAdoptable, name)
	}
	assert.ErrorIs(t, f.recover("adopt", marshal(t, rec), "exec-another"), protocol.ErrNotAdoptable, "another attempt's metadata")

	// Control: its own metadata, for its own attempt, is adopted.
	require.NoError(t, f.recover("adopt", marshal(t, rec), "exec-real"))
	require.NoError(t, f.inject("adopt", "0"))
	assert.Equal(t, "succeeded", f.wait("adopt").State)
}

// TestRecoverRefusesAGoneJobAndStopEndsItsGroup: a job whose leader is
// gone without recording a status is not_adoptable, while the rest of its
// group may run on; the stop the host sends next under the run ID it
// asked recover for ends that rest.
func TestRecoverRefusesAGoneJobAndStopEndsItsGroup(t *testing.T) {
	f := newFixture(t, "out")
	f.grace = 0
	sync := newSyncPipe(t)
	rec := f.run("run-1", groupWithStubbornChild, sync.env())
	child := sync.pid(f.ctx)
	killLeaderOnly(t, f.ctx, rec)
	res := f.wait("run-1")
	require.Equal(t, "failed", res.State, "the leader died without recording a status")
	f.restart()

	err := f.recover("adopt-1", f.fake.recovery("run-1"), "exec-run-1")
	require.ErrorIs(t, err, protocol.ErrNotAdoptable)
	require.False(t, groupEmpty(rec.PGID), "the rest of the group runs on")
	require.True(t, running(child))

	stop := f.stop("adopt-1")
	assert.True(t, stop.Stopped, stop.Evidence)
	assert.True(t, groupEmpty(rec.PGID), "stop under the new run ID answered while the group runs: %s", describe(rec))
	assert.False(t, running(child))
}

// TestForget: forget drops a settled run, its directory with it, and
// refuses a running one, whether this process holds the run or only its
// directory is left.
func TestForget(t *testing.T) {
	f := newFixture(t, "out")
	held := f.run("held", exitInput, nil)
	assert.ErrorIs(t, f.forget("held"), protocol.ErrConflict, "a running run")
	require.NoError(t, f.inject("held", "0"))
	f.wait("held")
	require.NoError(t, f.forget("held"))
	_, err := os.Stat(held.Dir)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the run's directory is gone")
	_, err = f.x.Wait(f.ctx, f.host, protocol.ExecutorWaitParams{Executor: executorName, RunID: "held"})
	assert.ErrorIs(t, err, protocol.ErrNotFound, "the run is dropped")

	unheldRunning := f.run("unheld-running", exitInput, nil)
	unheldEnded := f.run("unheld-ended", exitInput, nil)
	require.NoError(t, f.inject("unheld-ended", "0"))
	f.wait("unheld-ended")
	f.restart()
	assert.ErrorIs(t, f.forget("unheld-running"), protocol.ErrConflict, "a running job no process holds")
	_, err = os.Stat(unheldRunning.Dir)
	assert.NoError(t, err, "its directory stays")
	require.NoError(t, f.forget("unheld-ended"))
	_, err = os.Stat(unheldEnded.Dir)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NoError(t, f.forget("never-started"), "nothing to forget")
}

// TestStopSparesAProcessThatReusedThePid: a Recovery whose leader's start
// time is not that of the process now holding its pid names a job that is
// gone (the kernel reuses a pid only once no group uses it): stop signals
// nothing.
func TestStopSparesAProcessThatReusedThePid(t *testing.T) {
	f := newFixture(t, "out")
	// A process of the test's own, in a group of its own, holding the pid
	// a run's directory records with another start time.
	other := exec.Command("cat")
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	input, err := other.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, other.Start())
	t.Cleanup(func() {
		input.Close()
		_ = other.Wait()
	})
	start := procwatch.Identity(other.Process.Pid)
	require.NotZero(t, start)
	dir := filepath.Join(f.dir, "runs", runKey("reused"))
	require.NoError(t, os.MkdirAll(dir, 0o700))
	stale := jobs.Recovery{RunID: "reused", Dir: dir, PID: other.Process.Pid, PGID: other.Process.Pid, Start: start + 1}
	require.NoError(t, os.WriteFile(filepath.Join(dir, jobs.MetaFile), marshal(t, stale), 0o600))

	res := f.stop("reused")
	assert.True(t, res.Stopped, res.Evidence)
	assert.Contains(t, res.Evidence, "another process")
	assert.True(t, running(other.Process.Pid), "stop signalled the process that reused the pid")
}
