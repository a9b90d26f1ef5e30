// Package agent is the scripted agent: an executor the daemon serves for
// tests (bundled as "open-conduit extension-run agent") whose every run
// follows a script instead of thinking. extensiontest binds the Work a
// test creates to it, so a test says exactly which operations the run
// calls, with which inputs, and what each must answer.
//
// It is written with the Go SDK as a third party would write it: it
// imports protocol/... only.
//
// The script is the binding's executor config, plain JSON:
//
//	{"script": [
//	  {"call": "notes.add", "input": {"title": "x"}, "expect": {"note": "n-1"}},
//	  {"call": "notes.publish", "input": {"title": "x"}, "expect_error": "unauthorized"},
//	  {"fail": "give up"}
//	]}
//
// Each step is a toolbelt call (with an optional request_id; by default
// "<work id>/<step>", so a retried attempt replays what was committed), a
// pause ({"think": "1s"}, a Go duration of at most MaxThink: a turn that
// takes time, cut short by shutdown) or a failure. A call's answer is checked against expect (the result must hold
// every member expect names, recursively; arrays match element by element)
// or expect_error (the protocol error code it must be refused with); a call
// with neither passes whatever it answers unless it is refused. The first
// step that does not hold ends the run failed, its error naming the step.
// Wait and emit operations are called like any other.
//
// Every step's call, answer and verdict is appended as one JSON line to
// TranscriptFile in the executor's directory: the agent's transcript,
// which extensiontest shows as a failing step's evidence.
//
// A run lives in the agent process, and persists its Recovery (its ids and
// its config) through the host's fenced execution.persist_recovery before
// it starts. After the agent restarts, the host's recover adopts it by
// following the script again from its first step, under the toolbelt token
// of the attempt's new epoch: each call's request ID is the one the first
// process used, so what that process committed is replayed, not made
// again. Metadata that is not an agent run's, or is another attempt's, is
// not_adoptable.
package agent

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

//go:embed open-conduit-extension.json
var manifest []byte

// Name is the extension's name, and its executor's.
const Name = "agent"

// TranscriptFile is the agent's transcript in its executor directory: one
// JSON Entry a line, appended by every run.
const TranscriptFile = "transcript.jsonl"

// Bounds of a script and what the transcript keeps of an answer.
const (
	MaxSteps = 256
	// MaxThink bounds a think step's pause.
	MaxThink = 10 * time.Minute
	// maxKept bounds the bytes of an input or result a transcript line
	// repeats.
	maxKept = 4 << 10
)

// CallTimeout bounds one toolbelt call.
var CallTimeout = 30 * time.Second

// WarnEmptyScript is validate's warning about an empty script: valid, but
// its runs do nothing.
const WarnEmptyScript = "the script is empty: each run succeeds at once without calling anything"

// Config is a binding's executor config.
type Config struct {
	Script []Step `json:"script"`
}

// Step is one step of a script: exactly one of Call, Think and Fail.
type Step struct {
	// Call is the operation called through the run's toolbelt.
	Call  string          `json:"call,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// RequestID is the call's request ID; empty means "<work id>/<step>".
	RequestID string `json:"request_id,omitempty"`
	// Expect is what the result must hold (see the package doc); at most
	// one of Expect and ExpectError.
	Expect json.RawMessage `json:"expect,omitempty"`
	// ExpectError is the protocol error code the call must be refused
	// with, such as "unauthorized".
	ExpectError string `json:"expect_error,omitempty"`
	// Think pauses the run for this Go duration ("1s"), at most MaxThink.
	Think string `json:"think,omitempty"`
	// Fail ends the run failed with this message.
	Fail string `json:"fail,omitempty"`
}

// Recovery is the metadata a run persists through the host, from which a
// restarted agent adopts it.
type Recovery struct {
	RunID       string `json:"run_id"`
	WorkID      string `json:"work_id"`
	ExecutionID string `json:"execution_id"`
	// Config is the executor config the run follows.
	Config json.RawMessage `json:"config"`
}

// Entry is one line of the transcript.
type Entry struct {
	Work      string `json:"work"`
	Execution string `json:"execution"`
	Attempt   int    `json:"attempt"`
	// Step is the step's index in the script, from 0; -1 for the line
	// that ends a run.
	Step      int             `json:"step"`
	Call      string          `json:"call,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	// ErrorCode and ErrorMessage are a refused call's answer.
	ErrorCode    string `json:"error_code,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
	// Verdict is "ok", "mismatch", "failed" (a fail step) or, for the
	// last line of a run, "succeeded" or "failed".
	Verdict string `json:"verdict"`
	Detail  string `json:"detail,omitempty"`
}

// The verdicts of a transcript line.
const (
	VerdictOK        = "ok"
	VerdictMismatch  = "mismatch"
	VerdictFailed    = "failed"
	VerdictSucceeded = "succeeded"
)

// ParseConfig decodes an executor config strictly: unknown fields are
// refused, and every step must be one call or one failure.
func ParseConfig(raw json.RawMessage) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, protocol.Errorf(protocol.CodeInvalid, "agent executor config: %v", err)
	}
	if dec.More() {
		return c, protocol.Errorf(protocol.CodeInvalid, "agent executor config: data after the object")
	}
	if c.Script == nil {
		return c, protocol.Errorf(protocol.CodeInvalid, "agent executor config: script is required (an empty list runs nothing)")
	}
	if len(c.Script) > MaxSteps {
		return c, protocol.Errorf(protocol.CodeInvalid, "agent executor config: the script has %d steps, over %d", len(c.Script), MaxSteps)
	}
	for i, s := range c.Script {
		if err := s.check(); err != nil {
			return c, protocol.Errorf(protocol.CodeInvalid, "agent executor config: script[%d]: %v", i, err)
		}
	}
	return c, nil
}

func (s Step) check() error {
	kinds := 0
	for _, set := range []bool{s.Call != "", s.Think != "", s.Fail != ""} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds != 1:
		return errors.New("a step is exactly one of call, think and fail")
	case s.Call == "" && (s.Input != nil || s.Expect != nil || s.ExpectError != "" || s.RequestID != ""):
		return errors.New("a think or fail step takes no input, request_id or expectation")
	case s.Think != "":
		d, err := time.ParseDuration(s.Think)
		if err != nil || d <= 0 || d > MaxThink {
			return fmt.Errorf("think takes a duration such as \"1s\", above 0 and at most %v", MaxThink)
		}
	case s.Expect != nil && s.ExpectError != "":
		return errors.New("a call expects a result or an error code, not both")
	case s.Input != nil && !json.Valid(s.Input), s.Expect != nil && !json.Valid(s.Expect):
		return errors.New("input and expect must be JSON")
	}
	return nil
}

// Extension returns the agent: a fresh value with its own table of runs.
func Extension() *sdk.Extension {
	a := &agent{runs: map[string]*run{}}
	return &sdk.Extension{
		Manifest:   slices.Clone(manifest),
		Initialize: a.initialize,
		Validate:   validate,
		Executors: map[string]sdk.Executor{Name: {
			Run:     a.run,
			Wait:    a.wait,
			Recover: a.recover,
		}},
		Shutdown: func(context.Context, *sdk.Host) error { a.stopAll(); return nil },
	}
}

func validate(_ context.Context, p protocol.ValidateParams) (protocol.ValidateResult, error) {
	if p.Kind != protocol.ValidateExecutor {
		return protocol.ValidateResult{}, nil
	}
	c, err := ParseConfig(p.Config)
	if err != nil {
		return protocol.ValidateResult{}, err
	}
	res := protocol.ValidateResult{Describe: []string{fmt.Sprintf("each run follows a script of %d steps", len(c.Script))}}
	if len(c.Script) == 0 {
		res.Warnings = []string{WarnEmptyScript}
	}
	return res, nil
}

type agent struct {
	mu   sync.Mutex
	dir  string // the executor directory, where the transcript is
	runs map[string]*run
	// shutdown is set once shutdown ended the runs: they end with the
	// process, to be adopted by the next one, not failed.
	shutdown bool
	// wmu serialises transcript lines from concurrent runs.
	wmu sync.Mutex
}

// run is one run this process started or adopted.
type run struct {
	ctx    context.Context // the run's own, ended by shutdown
	cancel context.CancelFunc
	done   chan struct{} // closed once result is set
	result protocol.ExecutorWaitResult
}

func (a *agent) initialize(_ context.Context, p protocol.InitializeParams) error {
	dir := p.ExecutorDirs[Name]
	if dir == "" && p.StateDir != "" {
		dir = filepath.Join(p.StateDir, "executors", Name)
	}
	if dir == "" {
		return protocol.Errorf(protocol.CodeInvalid, "initialize names neither an executor directory for %s nor a state directory", Name)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	a.mu.Lock()
	a.dir = dir
	a.mu.Unlock()
	return nil
}

func (a *agent) run(ctx context.Context, host *sdk.Host, p protocol.ExecutorRunParams) (protocol.ExecutorRunResult, error) {
	if p.RunID == "" {
		return protocol.ExecutorRunResult{}, protocol.Errorf(protocol.CodeInvalid, "run_id is required")
	}
	c, err := ParseConfig(p.Config)
	if err != nil {
		return protocol.ExecutorRunResult{}, err
	}
	tb := sdk.ToolbeltOf(p)
	if err := needsToolbelt(c, tb); err != nil {
		return protocol.ExecutorRunResult{}, protocol.Errorf(protocol.CodeInvalid, "%v", err)
	}
	r, err := a.claim(p.RunID)
	if err != nil {
		return protocol.ExecutorRunResult{}, err
	}
	// Nothing runs before the host holds what a restarted agent needs.
	meta, err := json.Marshal(Recovery{RunID: p.RunID, WorkID: p.Work.ID, ExecutionID: p.Execution.ID, Config: p.Config})
	if err == nil {
		err = host.PersistRecovery(ctx, p.RunID, meta)
	}
	if err != nil {
		a.release(p.RunID)
		return protocol.ExecutorRunResult{}, err
	}
	go a.start(r, tb, p, c.Script)
	return protocol.ExecutorRunResult{Recovery: meta}, nil
}

// needsToolbelt refuses a script that calls operations when the run has no
// toolbelt to call them with.
func needsToolbelt(c Config, tb sdk.Toolbelt) error {
	if !tb.Granted() && slices.ContainsFunc(c.Script, func(s Step) bool { return s.Call != "" }) {
		return errors.New("the script calls operations but the binding grants no toolbelt (set toolbelt and operations on the binding)")
	}
	return nil
}

// claim registers a run under runID, not yet started: a second claim of
// the same id is a conflict.
func (a *agent) claim(runID string) (*run, error) {
	// The run outlives the request that starts it: it has its own
	// context, ended by shutdown.
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{ctx: ctx, cancel: cancel, done: make(chan struct{})}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, dup := a.runs[runID]; dup {
		cancel()
		return nil, protocol.Errorf(protocol.CodeConflict, "run %q already started", runID)
	}
	a.runs[runID] = r
	return r, nil
}

// release drops a claimed run that never started.
func (a *agent) release(runID string) {
	a.mu.Lock()
	r := a.runs[runID]
	delete(a.runs, runID)
	a.mu.Unlock()
	if r != nil {
		r.cancel()
	}
}

// start follows the script of a claimed run.
func (a *agent) start(r *run, tb sdk.Toolbelt, p protocol.ExecutorRunParams, script []Step) {
	defer r.cancel()
	r.result = a.follow(r.ctx, tb, p, script)
	close(r.done)
}

// follow runs the script and says how the run settled.
func (a *agent) follow(ctx context.Context, tb sdk.Toolbelt, p protocol.ExecutorRunParams, script []Step) protocol.ExecutorWaitResult {
	base := Entry{Work: p.Work.ID, Execution: p.Execution.ID, Attempt: p.Execution.Attempt}
	end := func(state, detail string) protocol.ExecutorWaitResult {
		e := base
		e.Step, e.Verdict, e.Detail = -1, state, detail
		a.write(e)
		out, _ := json.Marshal(map[string]int{"steps": len(script)})
		return protocol.ExecutorWaitResult{State: state, Error: detail, Output: out}
	}
	for i, s := range script {
		e := base
		e.Step = i
		if s.Fail != "" {
			e.Verdict, e.Detail = VerdictFailed, s.Fail
			a.write(e)
			return end(VerdictFailed, fmt.Sprintf("step %d: the script fails: %s", i, s.Fail))
		}
		if s.Think != "" {
			d, _ := time.ParseDuration(s.Think) // checked by ParseConfig
			t := time.NewTimer(d)
			select {
			case <-t.C:
				e.Verdict = VerdictOK
				a.write(e)
				continue
			case <-ctx.Done():
				t.Stop()
				e.Verdict, e.Detail = VerdictFailed, "the run was ended while it thought"
				a.write(e)
				return end(VerdictFailed, fmt.Sprintf("step %d: the run was ended while it thought", i))
			}
		}
		e.Call, e.Input = s.Call, clipJSON(s.Input)
		e.RequestID = s.RequestID
		if e.RequestID == "" {
			e.RequestID = p.Work.ID + "/" + strconv.Itoa(i)
		}
		var input any
		if s.Input != nil {
			input = s.Input
		}
		cctx, cancel := context.WithTimeout(ctx, CallTimeout)
		result, err := tb.Call(cctx, s.Call, e.RequestID, input)
		cancel()
		if err != nil {
			e.ErrorCode, e.ErrorMessage = string(protocol.CodeOf(err)), err.Error()
		} else {
			e.Result = clipJSON(result)
		}
		e.Verdict, e.Detail = VerdictOK, ""
		if why := verdict(s, result, err); why != "" {
			e.Verdict, e.Detail = VerdictMismatch, why
		}
		a.write(e)
		if e.Verdict != VerdictOK {
			return end(VerdictFailed, fmt.Sprintf("step %d (%s): %s", i, s.Call, e.Detail))
		}
	}
	return end(VerdictSucceeded, "")
}

// verdict is why a call's answer does not hold against the step, "" when
// it does.
func verdict(s Step, result json.RawMessage, err error) string {
	switch {
	case s.ExpectError != "" && err == nil:
		return fmt.Sprintf("expected the error %s, the call answered %s", s.ExpectError, clip(string(result)))
	case s.ExpectError != "" && string(protocol.CodeOf(err)) != s.ExpectError:
		return fmt.Sprintf("expected the error %s, the call was refused with %s: %s", s.ExpectError, protocol.CodeOf(err), clip(err.Error()))
	case s.ExpectError != "":
		return ""
	case err != nil:
		return fmt.Sprintf("the call was refused with %s: %s", protocol.CodeOf(err), clip(err.Error()))
	case s.Expect != nil:
		var want, got any
		if json.Unmarshal(s.Expect, &want) != nil || json.Unmarshal(result, &got) != nil {
			return fmt.Sprintf("the result %s is not JSON", clip(string(result)))
		}
		if path, ok := Holds(want, got, "$"); !ok {
			return fmt.Sprintf("at %s: expected %s, the result is %s", path, clip(string(s.Expect)), clip(string(result)))
		}
	}
	return ""
}

// Holds reports whether got holds want: every member of an object want
// names (recursively), arrays of the same length element by element, and
// other values equal. It returns the JSON path of the first difference.
func Holds(want, got any, path string) (string, bool) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path, false
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			gv, present := g[k]
			if !present {
				return path + "." + k, false
			}
			if p, ok := Holds(w[k], gv, path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path, false
		}
		for i := range w {
			if p, ok := Holds(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	}
	if want != got {
		return path, false
	}
	return "", true
}

func (a *agent) write(e Entry) {
	line, err := json.Marshal(e)
	if err != nil {
		return
	}
	a.mu.Lock()
	dir := a.dir
	a.mu.Unlock()
	a.wmu.Lock()
	defer a.wmu.Unlock()
	f, err := os.OpenFile(filepath.Join(dir, TranscriptFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: transcript: %v\n", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		fmt.Fprintf(os.Stderr, "agent: transcript: %v\n", err)
	}
}

func (a *agent) wait(ctx context.Context, _ *sdk.Host, p protocol.ExecutorWaitParams) (protocol.ExecutorWaitResult, error) {
	a.mu.Lock()
	r, ok := a.runs[p.RunID]
	a.mu.Unlock()
	if !ok {
		return protocol.ExecutorWaitResult{}, protocol.Errorf(protocol.CodeNotFound, "run %q is not known to this process", p.RunID)
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return protocol.ExecutorWaitResult{}, ctx.Err()
	}
	a.mu.Lock()
	shutdown := a.shutdown
	a.mu.Unlock()
	if shutdown && r.result.State != VerdictSucceeded {
		// Shutdown cut the run short: the attempt is not over, and the
		// host recovers it from the next agent process.
		return protocol.ExecutorWaitResult{}, protocol.Errorf(protocol.CodeShuttingDown, "run %q was ended by shutdown, for the next agent process to adopt", p.RunID)
	}
	return r.result, nil
}

// recover adopts a run a previous agent process started, from its
// Recovery: it follows the script again from the first step, under the
// toolbelt of the attempt's new epoch, each call with the request ID the
// first process used, so what that one committed is replayed. Metadata an
// agent run did not write, or another attempt's, is not_adoptable.
func (a *agent) recover(ctx context.Context, host *sdk.Host, p protocol.ExecutorRecoverParams) (protocol.ExecutorRecoverResult, error) {
	a.mu.Lock()
	_, ours := a.runs[p.RunID]
	a.mu.Unlock()
	if ours {
		return protocol.ExecutorRecoverResult{}, nil
	}
	refuse := func(why string) (protocol.ExecutorRecoverResult, error) {
		return protocol.ExecutorRecoverResult{}, protocol.Errorf(protocol.CodeNotAdoptable, "run %q: %s", p.RunID, why)
	}
	var rec Recovery
	dec := json.NewDecoder(bytes.NewReader(p.Recovery))
	dec.DisallowUnknownFields()
	if len(p.Recovery) == 0 || dec.Decode(&rec) != nil || dec.More() || rec.RunID == "" || rec.ExecutionID == "" {
		return refuse("no agent run's recovery metadata")
	}
	if (p.Execution.ID != "" && rec.ExecutionID != p.Execution.ID) || (p.Work.ID != "" && rec.WorkID != p.Work.ID) {
		return refuse("the metadata is another attempt's")
	}
	c, err := ParseConfig(rec.Config)
	if err != nil {
		return refuse("the metadata's script is not one: " + err.Error())
	}
	tb := sdk.ToolbeltOf(protocol.ExecutorRunParams{Endpoint: p.Endpoint, Token: p.Token})
	if err := needsToolbelt(c, tb); err != nil {
		return refuse(err.Error())
	}
	r, err := a.claim(p.RunID)
	if err != nil {
		return protocol.ExecutorRecoverResult{}, nil // adopted meanwhile
	}
	work, execution := p.Work, p.Execution
	work.ID, execution.ID = rec.WorkID, rec.ExecutionID
	go a.start(r, tb, protocol.ExecutorRunParams{Executor: Name, RunID: p.RunID, Work: work, Execution: execution, Config: rec.Config}, c.Script)
	return protocol.ExecutorRecoverResult{}, nil
}

func (a *agent) stopAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.shutdown = true
	for _, r := range a.runs {
		r.cancel()
	}
}

func clip(s string) string {
	const max = 512
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// clipJSON keeps a value the transcript repeats whole when it is small,
// and as a JSON string of its start when it is not.
func clipJSON(v json.RawMessage) json.RawMessage {
	if len(v) <= maxKept {
		return v
	}
	s, _ := json.Marshal(string(v[:maxKept]) + "…")
	return s
}
