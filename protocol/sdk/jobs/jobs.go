package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/procwatch"
)

// The files every run's directory holds, besides its outputs.
const (
	InputFile = "input"         // a named pipe: the job's standard input
	ExitFile  = "exit-status"   // the job's exit status, written when it ends
	MetaFile  = "recovery.json" // the run's Recovery, for a stop or forget of a run no executor process holds
)

// DefaultCommand is a job that waits for one line on its input and exits
// with the status the line names (0 when empty): whoever drives the Work
// says how it ends, by injecting that line. Executors run it for a binding
// that names no command.
const DefaultCommand = `read status rest; exit "${status:-0}"`

// DefaultStopGrace is how long stop waits after SIGTERM before it sends
// SIGKILL, when the Spec sets no grace of its own.
const DefaultStopGrace = 2 * time.Second

// stopConfirm bounds how long stop waits for the group to empty after
// SIGKILL.
const stopConfirm = 10 * time.Second

// defaultTail is how much of each output live answers when the host asks
// for no particular tail.
const defaultTail = 4096

// jobScript is the job's process group leader. It runs the command in a
// child shell, then records the command's exit status in the run's
// directory. It traps INT and TERM so it outlives an interrupt or a stop's
// SIGTERM long enough to record the status; the child shell gets the
// default handlers back. The child writes one byte to file descriptor 3
// once it runs with them, so Run answers only when an interrupt or a stop
// can no longer reach the job half set up. $1 is the command, $2 the exit
// status file, $3 the child's name in ps.
const jobScript = `trap : INT TERM
sh -c 'printf x >&3; exec 3>&-; eval "$1"' "$3" "$1"
status=$?
exec 3>&-
printf '%s\n' "$status" > "$2.tmp" && mv "$2.tmp" "$2"
exit "$status"`

// Recovery is the metadata a run persists through the host and
// executor.recover receives after a restart.
type Recovery struct {
	RunID string `json:"run_id"`
	// ExecutionID and WorkID name the attempt the run serves.
	ExecutionID string `json:"execution_id,omitempty"`
	WorkID      string `json:"work_id,omitempty"`
	// Dir is the run's directory.
	Dir string `json:"dir"`
	// PID is the job's process group leader, and PGID its process group.
	PID  int `json:"pid"`
	PGID int `json:"pgid"`
	// Start is the leader's start time (clock ticks after boot), so a
	// later process reusing the pid is never taken for the job.
	Start uint64 `json:"start,omitempty"`
}

// Spec is what differs between the executors built on the model.
type Spec struct {
	// Name is the executor's name: its directory is the one initialize
	// names for it (else executors/<Name> of the state directory), and its
	// jobs' processes are named after it.
	Name string
	// Outputs are the files of a run's directory its job writes to: one
	// name takes standard output and error together; two take standard
	// output, then standard error. Live answers the tail of each, in order.
	Outputs []string
	// Command is what a run starts, from its params: only the operator's
	// binding may choose it, never anything an Event or a route carries.
	// Its refusal answers executor.run.
	Command func(protocol.ExecutorRunParams) (string, error)
	// StopGrace, when set, is read at each stop: how long stop waits after
	// SIGTERM before SIGKILL. Unset, DefaultStopGrace.
	StopGrace *time.Duration
	// Report, when set, is what a settled run's wait answers as its
	// Output, computed once for each run: a second wait of the run answers
	// the first one's result.
	Report func(ctx context.Context, host *sdk.Host, runID, dir string) json.RawMessage
}

// Executor runs the jobs of one executor: the runs this process started
// or adopted, by run id.
type Executor struct {
	spec Spec

	mu   sync.Mutex
	dir  string // the executor's directory; runs live in dir/runs/<key>
	jobs map[string]*job
	// refused is the metadata of runs recover refused because their job
	// was gone, by the run ID the host gave recover: the stop the host
	// sends next under that ID ends what is left of the job's group.
	refused map[string]Recovery
}

// New returns an executor with no runs, ready for Initialize. A Spec
// without a name, a Command, or one or two Outputs is a programming error,
// and panics.
func New(spec Spec) *Executor {
	if spec.Name == "" || spec.Command == nil || len(spec.Outputs) < 1 || len(spec.Outputs) > 2 {
		panic("jobs.New: a Spec needs a Name, a Command and one or two Outputs")
	}
	return &Executor{spec: spec, jobs: map[string]*job{}, refused: map[string]Recovery{}}
}

// Methods are the executor's handlers, for sdk.Extension.Executors: every
// method and control the model serves (run, wait, recover; inject,
// interrupt; stop, forget, live).
func (x *Executor) Methods() sdk.Executor {
	return sdk.Executor{
		Run:       x.run,
		Wait:      x.wait,
		Recover:   x.recover,
		Inject:    x.inject,
		Interrupt: x.interrupt,
		Stop:      x.stop,
		Forget:    x.forget,
		Live:      x.live,
	}
}

// job is a run this process started or adopted.
type job struct {
	rec  Recovery
	done chan struct{} // closed once the job ended and result is set

	mu      sync.Mutex
	stopped bool // a stop was asked for
	result  protocol.ExecutorWaitResult
	// reported is the wait result with the Spec's Report, once computed,
	// so a second wait of the run does not report it twice.
	reported *protocol.ExecutorWaitResult
}

func (j *job) settled() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// Initialize takes the executor's directory from initialize: the one it
// names for the executor, else executors/<Name> of the state directory.
func (x *Executor) Initialize(ctx context.Context, p protocol.InitializeParams) error {
	dir := p.ExecutorDirs[x.spec.Name]
	if dir == "" && p.StateDir != "" {
		dir = filepath.Join(p.StateDir, "executors", x.spec.Name)
	}
	if dir == "" {
		return protocol.Errorf(protocol.CodeInvalid, "initialize names neither an executor directory for %s nor a state directory", x.spec.Name)
	}
	x.mu.Lock()
	x.dir = dir
	x.mu.Unlock()
	return nil
}

// runDir is the directory of a run: named by a digest of its id, which the
// host chose and may hold any character.
func (x *Executor) runDir(runID string) string {
	sum := sha256.Sum256([]byte(runID))
	return filepath.Join(x.runsDir(), hex.EncodeToString(sum[:12]))
}

// runsDir is the directory every run's directory is in.
func (x *Executor) runsDir() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return filepath.Join(x.dir, "runs")
}

// ownRunDir reports whether dir is the directory of the run runID: the
// digest-named directory directly under the runs directory, with no link
// on the way leading anywhere else.
func (x *Executor) ownRunDir(dir, runID string) bool {
	want := x.runDir(runID)
	if dir != want || !filepath.IsAbs(dir) {
		return false
	}
	resolvedRuns, err1 := filepath.EvalSymlinks(x.runsDir())
	resolved, err2 := filepath.EvalSymlinks(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(resolvedRuns, resolved)
	return err == nil && rel == filepath.Base(want)
}

func (x *Executor) lookup(runID string) (*job, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	j, ok := x.jobs[runID]
	if !ok {
		return nil, protocol.Errorf(protocol.CodeNotFound, "run %q is not known to this process", runID)
	}
	return j, nil
}

func (x *Executor) run(ctx context.Context, host *sdk.Host, p protocol.ExecutorRunParams) (protocol.ExecutorRunResult, error) {
	cmdline, err := x.spec.Command(p)
	if err != nil {
		return protocol.ExecutorRunResult{}, err
	}
	if p.RunID == "" {
		return protocol.ExecutorRunResult{}, protocol.Errorf(protocol.CodeInvalid, "run_id is required")
	}
	if _, err := x.lookup(p.RunID); err == nil {
		return protocol.ExecutorRunResult{}, protocol.Errorf(protocol.CodeConflict, "run %q already started", p.RunID)
	}
	dir := x.runDir(p.RunID)
	j, cmd, err := x.start(dir, p.RunID, cmdline, jobEnv(p))
	if err != nil {
		return protocol.ExecutorRunResult{}, fmt.Errorf("starting run %s: %w", p.RunID, err)
	}
	j.rec.ExecutionID, j.rec.WorkID = p.Execution.ID, p.Work.ID
	x.mu.Lock()
	x.jobs[p.RunID] = j
	x.mu.Unlock()
	go j.reap(cmd)

	meta, err := json.Marshal(j.rec)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, MetaFile), meta, 0o600)
	}
	if err == nil {
		err = host.PersistRecovery(ctx, p.RunID, meta)
	}
	if err != nil {
		// Nothing may keep running for a run the host does not hold
		// (it refused the persistence) or cannot recover.
		j.mu.Lock()
		j.stopped = true
		j.mu.Unlock()
		x.kill(j.rec, j.done)
		return protocol.ExecutorRunResult{}, err
	}
	return protocol.ExecutorRunResult{Recovery: meta}, nil
}

// jobEnv is what a job's environment adds to the executor process's: the
// run's environment layer, then its toolbelt (the endpoint and token
// `open-conduit toolbelt call` reads), which no layer can override.
func jobEnv(p protocol.ExecutorRunParams) map[string]string {
	env := maps.Clone(p.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, sdk.ToolbeltOf(p).Env())
	return env
}

// start starts a run's job in dir, detached in its own process group.
func (x *Executor) start(dir, runID, command string, env map[string]string) (*job, *exec.Cmd, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	input := filepath.Join(dir, InputFile)
	if err := syscall.Mkfifo(input, 0o600); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, nil, fmt.Errorf("input pipe: %w", err)
	}
	// Opened for reading and writing, the pipe never blocks here, and the
	// job holding both ends never reads end of file: input can be
	// injected for as long as it runs, by whichever executor process.
	in, err := os.OpenFile(input, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	defer in.Close()
	var outs []*os.File
	defer func() {
		for _, f := range outs {
			f.Close()
		}
	}()
	for _, name := range x.spec.Outputs {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, nil, err
		}
		outs = append(outs, f)
	}
	cmd := exec.Command("/bin/sh", "-c", jobScript, x.spec.Name+"-job", command, filepath.Join(dir, ExitFile), x.spec.Name+"-command")
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, outs[0], outs[len(outs)-1]
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ready, readyW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer ready.Close()
	cmd.ExtraFiles = []*os.File{readyW}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return nil, nil, err
	}
	// One byte once the command runs; end of file if the job ended first.
	_, _ = ready.Read(make([]byte, 1))
	pid := cmd.Process.Pid
	j := &job{rec: Recovery{RunID: runID, Dir: dir, PID: pid, PGID: pid, Start: procwatch.Identity(pid)}, done: make(chan struct{})}
	return j, cmd, nil
}

// reap waits for a job this process started (its child) and settles it.
func (j *job) reap(cmd *exec.Cmd) {
	err := cmd.Wait()
	var status *int
	if cmd.ProcessState != nil && cmd.ProcessState.Exited() {
		code := cmd.ProcessState.ExitCode()
		status = &code
	}
	j.settle(status, err)
}

// watch waits for an adopted job (not this process's child) and settles
// it from the status it recorded on disk.
func (j *job) watch() {
	_ = procwatch.WaitExit(context.Background(), j.rec.PID)
	j.settle(nil, nil)
}

// settle records how the job ended and wakes its waiters. The recorded
// exit status is preferred; status is the leader's own exit when this
// process reaped it.
func (j *job) settle(status *int, waitErr error) {
	if recorded, ok := readExit(j.rec.Dir); ok {
		status = &recorded
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.stopped:
		j.result = protocol.ExecutorWaitResult{State: "stopped", Error: "stopped"}
		if status != nil {
			j.result.ExitCode = *status
		}
	case status == nil:
		msg := "the job ended without recording its exit status"
		if waitErr != nil {
			msg += ": " + waitErr.Error()
		}
		j.result = protocol.ExecutorWaitResult{State: "failed", Error: msg}
	case *status == 0:
		j.result = protocol.ExecutorWaitResult{State: "succeeded"}
	default:
		j.result = protocol.ExecutorWaitResult{State: "failed", ExitCode: *status, Error: "exit status " + strconv.Itoa(*status)}
	}
	close(j.done)
}

// readExit reads the exit status the job recorded in dir.
func readExit(dir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(dir, ExitFile))
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	return n, err == nil
}

func (x *Executor) wait(ctx context.Context, host *sdk.Host, p protocol.ExecutorWaitParams) (protocol.ExecutorWaitResult, error) {
	j, err := x.lookup(p.RunID)
	if err != nil {
		return protocol.ExecutorWaitResult{}, err
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		// Observation ends; the job goes on.
		return protocol.ExecutorWaitResult{}, ctx.Err()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if x.spec.Report == nil {
		return j.result, nil
	}
	if j.reported == nil {
		res := j.result
		res.Output = x.spec.Report(ctx, host, p.RunID, j.rec.Dir)
		j.reported = &res
	}
	return *j.reported, nil
}

// recover adopts a run from its persisted metadata: a job still running
// (the same process, by pid and start time) is watched again; a job that
// recorded its exit status settles with it; anything else cannot be
// adopted.
func (x *Executor) recover(ctx context.Context, host *sdk.Host, p protocol.ExecutorRecoverParams) (protocol.ExecutorRecoverResult, error) {
	if j, err := x.lookup(p.RunID); err == nil && j != nil {
		return protocol.ExecutorRecoverResult{}, nil // already ours
	}
	var rec Recovery
	if len(p.Recovery) == 0 || json.Unmarshal(p.Recovery, &rec) != nil || rec.PID <= 0 || rec.PGID <= 0 {
		return protocol.ExecutorRecoverResult{}, protocol.Errorf(protocol.CodeNotAdoptable, "run %q: no usable recovery metadata", p.RunID)
	}
	// The host addresses the adopted run by a new run ID; the job is found
	// through the metadata, which must name a run of this executor (its
	// directory derived from its own run ID) and the same attempt.
	if !x.ownRunDir(rec.Dir, rec.RunID) {
		return protocol.ExecutorRecoverResult{}, protocol.Errorf(protocol.CodeNotAdoptable,
			"run %q: the metadata names a directory that is not its run's own under this executor's runs directory", p.RunID)
	}
	// The metadata must be what this executor wrote in that directory:
	// the processes it names are the ones stop would signal.
	if onDisk, found, err := readMeta(rec.Dir); err != nil || !found || onDisk != rec {
		return protocol.ExecutorRecoverResult{}, protocol.Errorf(protocol.CodeNotAdoptable,
			"run %q: the metadata differs from what the run's directory records", p.RunID)
	}
	if rec.ExecutionID != "" && p.Execution.ID != "" && rec.ExecutionID != p.Execution.ID {
		return protocol.ExecutorRecoverResult{}, protocol.Errorf(protocol.CodeNotAdoptable, "run %q: the metadata is for another attempt", p.RunID)
	}
	j := &job{rec: rec, done: make(chan struct{})}
	switch {
	case procwatch.Running(rec.PID, rec.Start):
		go j.watch()
	default:
		if _, ok := readExit(rec.Dir); !ok {
			// The metadata is this executor's own (checked above), so
			// its group may be signalled: the leader is gone, the rest
			// of the group may not be.
			x.mu.Lock()
			x.refused[p.RunID] = rec
			x.mu.Unlock()
			return protocol.ExecutorRecoverResult{}, protocol.Errorf(protocol.CodeNotAdoptable,
				"run %q: its job is gone and recorded no exit status", p.RunID)
		}
		j.settle(nil, nil)
	}
	x.mu.Lock()
	x.jobs[p.RunID] = j
	x.mu.Unlock()
	return protocol.ExecutorRecoverResult{}, nil
}

func (x *Executor) inject(ctx context.Context, host *sdk.Host, p protocol.ExecutorInjectParams) (protocol.ExecutorInjectResult, error) {
	j, err := x.lookup(p.RunID)
	if err != nil {
		return protocol.ExecutorInjectResult{}, err
	}
	if j.settled() {
		return protocol.ExecutorInjectResult{}, protocol.Errorf(protocol.CodeConflict, "run %q has ended", p.RunID)
	}
	var lines []string
	if p.Text != "" {
		lines = append(lines, strings.TrimSuffix(p.Text, "\n"))
	}
	for _, ev := range p.Events {
		b, err := json.Marshal(ev)
		if err != nil {
			return protocol.ExecutorInjectResult{}, err
		}
		lines = append(lines, string(b))
	}
	if len(lines) == 0 {
		return protocol.ExecutorInjectResult{}, protocol.Errorf(protocol.CodeInvalid, "nothing to inject")
	}
	// Non-blocking: a job that stopped reading refuses rather than
	// stalling the call.
	f, err := os.OpenFile(filepath.Join(j.rec.Dir, InputFile), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return protocol.ExecutorInjectResult{}, fmt.Errorf("opening the input of run %s: %w", p.RunID, err)
	}
	defer f.Close()
	if _, err := io.WriteString(f, strings.Join(lines, "\n")+"\n"); err != nil {
		return protocol.ExecutorInjectResult{}, fmt.Errorf("writing the input of run %s: %w", p.RunID, err)
	}
	return protocol.ExecutorInjectResult{}, nil
}

func (x *Executor) interrupt(ctx context.Context, host *sdk.Host, p protocol.ExecutorInterruptParams) (protocol.ExecutorInterruptResult, error) {
	j, err := x.lookup(p.RunID)
	if err != nil {
		return protocol.ExecutorInterruptResult{}, err
	}
	if j.settled() {
		return protocol.ExecutorInterruptResult{}, nil
	}
	if err := syscall.Kill(-j.rec.PGID, syscall.SIGINT); err != nil && !errors.Is(err, syscall.ESRCH) {
		return protocol.ExecutorInterruptResult{}, fmt.Errorf("interrupting run %s: %w", p.RunID, err)
	}
	return protocol.ExecutorInterruptResult{}, nil
}

// stop ends every process of the run's group: SIGTERM, then after the
// stop grace SIGKILL, and answers stopped only once none is left. A run
// recover refused (under the run ID the host adopts it by) is stopped from
// the metadata recover was given; one no executor process holds, from the
// metadata in its directory; a run with neither has no process this
// executor started.
func (x *Executor) stop(ctx context.Context, host *sdk.Host, p protocol.ExecutorStopParams) (protocol.ExecutorStopResult, error) {
	j, err := x.lookup(p.RunID)
	if err == nil {
		j.mu.Lock()
		j.stopped = true
		j.mu.Unlock()
		return x.kill(j.rec, j.done), nil
	}
	x.mu.Lock()
	rec, refused := x.refused[p.RunID]
	x.mu.Unlock()
	if refused {
		res := x.kill(rec, nil)
		if res.Stopped {
			x.mu.Lock()
			delete(x.refused, p.RunID)
			x.mu.Unlock()
		}
		return res, nil
	}
	rec, found, err := readMeta(x.runDir(p.RunID))
	if err != nil {
		return protocol.ExecutorStopResult{}, err
	}
	if !found {
		return protocol.ExecutorStopResult{Stopped: true, Evidence: fmt.Sprintf("no job of run %q was started here", p.RunID)}, nil
	}
	return x.kill(rec, nil), nil
}

// readMeta reads the Recovery a run's directory keeps.
func readMeta(dir string) (Recovery, bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Recovery{}, false, nil
	}
	if err != nil {
		return Recovery{}, false, err
	}
	var rec Recovery
	if err := json.Unmarshal(data, &rec); err != nil {
		return Recovery{}, false, fmt.Errorf("%s: %w", filepath.Join(dir, MetaFile), err)
	}
	return rec, true, nil
}

// stopGrace is the Spec's grace between SIGTERM and SIGKILL, read now.
func (x *Executor) stopGrace() time.Duration {
	if x.spec.StopGrace != nil {
		return *x.spec.StopGrace
	}
	return DefaultStopGrace
}

// kill stops the group of the job rec describes and reports what it saw.
// done, when known, closes once the job's leader has ended.
func (x *Executor) kill(rec Recovery, done <-chan struct{}) protocol.ExecutorStopResult {
	pgid := rec.PGID
	if cur := procwatch.Identity(rec.PID); rec.Start != 0 && cur != 0 && cur != rec.Start {
		// The pid is another process's now, which the kernel allows only
		// once no group uses it: the job's group is gone.
		return protocol.ExecutorStopResult{Stopped: true, Evidence: fmt.Sprintf("process group %d ended; its pid now names another process", pgid)}
	}
	if !procwatch.GroupAlive(pgid) {
		return protocol.ExecutorStopResult{Stopped: true, Evidence: fmt.Sprintf("process group %d has no process left", pgid)}
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	grace, cancel := context.WithTimeout(context.Background(), x.stopGrace())
	if done != nil {
		select {
		case <-done:
		case <-grace.Done():
		}
	} else {
		procwatch.WaitGroupGone(grace, pgid)
	}
	cancel()
	signals := "SIGTERM"
	if procwatch.GroupAlive(pgid) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		signals = "SIGTERM, then SIGKILL"
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopConfirm)
	defer cancel()
	if !procwatch.WaitGroupGone(ctx, pgid) {
		return protocol.ExecutorStopResult{Stopped: false, Evidence: fmt.Sprintf("process group %d still has processes after %s", pgid, signals)}
	}
	return protocol.ExecutorStopResult{Stopped: true, Evidence: fmt.Sprintf("process group %d has no process left after %s", pgid, signals)}
}

func (x *Executor) forget(ctx context.Context, host *sdk.Host, p protocol.ExecutorForgetParams) (protocol.ExecutorForgetResult, error) {
	j, err := x.lookup(p.RunID)
	if err != nil {
		// Nothing kept in this process; the directory may still be there.
		dir := x.runDir(p.RunID)
		rec, found, err := readMeta(dir)
		if err != nil {
			return protocol.ExecutorForgetResult{}, err
		}
		if found && procwatch.Running(rec.PID, rec.Start) {
			return protocol.ExecutorForgetResult{}, protocol.Errorf(protocol.CodeConflict, "run %q is still running: stop it first", p.RunID)
		}
		return protocol.ExecutorForgetResult{}, os.RemoveAll(dir)
	}
	if !j.settled() {
		return protocol.ExecutorForgetResult{}, protocol.Errorf(protocol.CodeConflict, "run %q is still running: stop it first", p.RunID)
	}
	if err := os.RemoveAll(j.rec.Dir); err != nil {
		return protocol.ExecutorForgetResult{}, err
	}
	x.mu.Lock()
	delete(x.jobs, p.RunID)
	x.mu.Unlock()
	return protocol.ExecutorForgetResult{}, nil
}

func (x *Executor) live(ctx context.Context, host *sdk.Host, p protocol.ExecutorLiveParams) (protocol.ExecutorLiveResult, error) {
	j, err := x.lookup(p.RunID)
	if err != nil || j.settled() {
		return protocol.ExecutorLiveResult{}, protocol.Errorf(protocol.CodeNotLive, "run %q is not running", p.RunID)
	}
	tail := p.Tail
	if tail <= 0 {
		tail = defaultTail
	}
	var res protocol.ExecutorLiveResult
	for _, name := range x.spec.Outputs {
		out, err := tailOf(filepath.Join(j.rec.Dir, name), int64(tail))
		if err != nil {
			return protocol.ExecutorLiveResult{}, err
		}
		out.Name = name
		res.Outputs = append(res.Outputs, out)
	}
	return res, nil
}

// tailOf is the last n bytes of the file at path.
func tailOf(path string, n int64) (protocol.LiveOutput, error) {
	f, err := os.Open(path)
	if err != nil {
		return protocol.LiveOutput{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return protocol.LiveOutput{}, err
	}
	size := info.Size()
	from := max(size-n, 0)
	buf := make([]byte, size-from)
	if _, err := f.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return protocol.LiveOutput{}, err
	}
	return protocol.LiveOutput{MediaType: "text/plain", Size: size, Tail: buf}, nil
}
