package drill

import (
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// RunOptions say how Run replays a drill outside go test.
type RunOptions struct {
	Options
	// Keep keeps the drill's work directory (its config, state and the
	// daemon's log) and names it in the result.
	Keep bool
	// Verbose logs every step, not only a failing drill's.
	Verbose bool
	// Log hears the drill's step-by-step log (testscript's), at its end.
	Log io.Writer
}

// Result is how one drill run went.
type Result struct {
	Name    string `json:"name"`
	Passed  bool   `json:"passed"`
	Skipped bool   `json:"skipped,omitempty"`
	// Elapsed is the run's wall time, in seconds.
	Elapsed float64 `json:"elapsed_seconds"`
	// WorkDir is the kept work directory (RunOptions.Keep).
	WorkDir string `json:"work_dir,omitempty"`
	// Log is the step-by-step log testscript kept: the whole script with
	// -v or on failure, else only its PASS line.
	Log string `json:"log"`
}

// Run replays the embedded drill name against opts.Binary, as go test
// ./scenarios -run TestDrills/NAME does, with a testscript.T of its own.
func Run(name string, opts RunOptions) (Result, error) {
	root, err := os.MkdirTemp("", "drill")
	if err != nil {
		return Result{}, err
	}
	if !opts.Keep {
		defer os.RemoveAll(root)
	}
	files, err := Extract(root, name)
	if err != nil {
		return Result{}, err
	}
	p := Params(opts.Options)
	p.Files = files
	if opts.Keep {
		p.WorkdirRoot = root
	}
	t := &runT{verbose: opts.Verbose}
	start := time.Now()
	testscript.RunT(t, p)
	res := Result{Name: name, Elapsed: time.Since(start).Seconds()}
	if len(t.subs) != 1 {
		return res, fmt.Errorf("drill %s ran %d scripts, want 1", name, len(t.subs))
	}
	sub := t.subs[0]
	res.Passed, res.Skipped, res.Log = !sub.failed, sub.skipped, sub.log.String()
	if opts.Keep {
		res.WorkDir = root
	}
	if opts.Log != nil {
		io.WriteString(opts.Log, res.Log)
	}
	return res, nil
}

// runT is testscript.T outside go test: Run runs a script on its own
// goroutine (FailNow and Skip end it with runtime.Goexit, as testing.T's
// do), one at a time; the log is kept for the Result.
type runT struct {
	verbose bool

	mu      sync.Mutex
	log     strings.Builder
	failed  bool
	skipped bool
	subs    []*runT
}

var _ testscript.T = (*runT)(nil)

func (t *runT) Skip(args ...any) {
	t.Log(args...)
	t.mu.Lock()
	t.skipped = true
	t.mu.Unlock()
	goruntime.Goexit()
}

func (t *runT) Fatal(args ...any) {
	t.Log(args...)
	t.FailNow()
}

func (t *runT) FailNow() {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	goruntime.Goexit()
}

// Parallel does nothing: drills run one at a time.
func (t *runT) Parallel() {}

func (t *runT) Log(args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintln(&t.log, args...)
}

func (t *runT) Run(name string, f func(testscript.T)) {
	sub := &runT{verbose: t.verbose}
	t.subs = append(t.subs, sub)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(sub)
	}()
	<-done
	if sub.failed {
		t.mu.Lock()
		t.failed = true
		t.mu.Unlock()
	}
}

func (t *runT) Verbose() bool { return t.verbose }
