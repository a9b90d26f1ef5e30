package executortest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/host/hosttest"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// finish ends the job of an execution under executorDir as the work
// itself would: the jobs the suite starts (no command) exit with the
// status they read.
func (x Executor) finish(executorDir, executionID string, state runtime.ExecutionState) error {
	status := "0"
	if state != runtime.ExecutionSucceeded {
		status = "1"
	}
	recs, err := x.records(executorDir)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if rec.ExecutionID == executionID {
			return x.WriteInput(rec, status)
		}
	}
	return fmt.Errorf("no run of execution %q under %s", executionID, executorDir)
}

// crashable is the executor attached in process, where a crash is a new
// executor value taking over and every call in flight on the old one
// failing as a broken pipe would.
type crashable struct {
	mk  func() *sdk.Extension
	svc *host.Service
	m   *protocol.Manifest
	// root is the host's state directory: the executor keeps its runs
	// under its executor directory there.
	root string

	mu      sync.Mutex
	gen     uint64
	ext     sdk.Caller
	current context.Context
	crash   context.CancelFunc
}

// attach starts a fresh executor value, as a restarted process is.
func (c *crashable) attach(ctx context.Context) error {
	ext, err := sdk.Attach(c.mk(), c.svc)
	if err != nil {
		return err
	}
	if _, err := host.Attach(ctx, ext, c.svc, c.root, protocol.ConfigureParams{}); err != nil {
		return err
	}
	live, crash := context.WithCancel(context.Background())
	c.mu.Lock()
	c.gen++
	c.ext, c.current, c.crash = ext, live, crash
	c.mu.Unlock()
	return nil
}

func (c *crashable) Call(ctx context.Context, method string, params, result any) error {
	c.mu.Lock()
	ext, live := c.ext, c.current
	c.mu.Unlock()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	unlink := context.AfterFunc(live, stop)
	defer unlink()
	err := ext.Call(ctx, method, params, result)
	if live.Err() != nil {
		return fmt.Errorf("%w: the executor crashed", jsonrpc.ErrTransport)
	}
	return err
}

func (c *crashable) CallInTx(ctx context.Context, method string, params, result any) error {
	return c.Call(ctx, method, params, result)
}

func (c *crashable) Manifest() *protocol.Manifest { return c.m }
func (c *crashable) Service() *host.Service       { return c.svc }
func (c *crashable) Generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *crashable) Crash(ctx context.Context) error {
	c.mu.Lock()
	c.crash()
	c.mu.Unlock()
	return c.attach(ctx)
}

var _ host.Conn = (*crashable)(nil)

// InProcessTarget is the executor mk makes (x.Extension, or a weakened
// copy of it), attached in process to the real host service; its crash
// is a fresh value taking over.
func (x Executor) InProcessTarget(t *testing.T, ctx context.Context, mk func() *sdk.Extension) (conformance.ExecutorTarget, error) {
	root := t.TempDir()
	m := x.Manifest(t)
	dir := host.InitializeParams(root, m).ExecutorDirs[x.Name]
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		return conformance.ExecutorTarget{}, err
	}
	c := &crashable{mk: mk, svc: host.NewService(host.ServiceConfig{Manifest: m, Store: st}), m: m, root: root}
	if err := c.attach(ctx); err != nil {
		st.Close()
		return conformance.ExecutorTarget{}, err
	}
	return conformance.ExecutorTarget{
		Executor: host.NewRemote(c).Executor(x.Name),
		Crash:    c.Crash,
		Finish: func(ctx context.Context, executionID string, state runtime.ExecutionState) error {
			return x.finish(dir, executionID, state)
		},
		Close: func() error {
			x.KillAllJobs(dir)
			return st.Close()
		},
	}, nil
}

// processTarget is the executor as a host.Process over this test binary
// (see ServeChild), its package the current directory; its crash is
// SIGKILL to its group, and the host restarts it on a fake clock.
func (x Executor) processTarget(t *testing.T, ctx context.Context) (conformance.ExecutorTarget, error) {
	exe, err := os.Executable()
	if err != nil {
		return conformance.ExecutorTarget{}, err
	}
	abs, err := filepath.Abs(".")
	if err != nil {
		return conformance.ExecutorTarget{}, err
	}
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		return conformance.ExecutorTarget{}, err
	}
	m := x.Manifest(t)
	state := t.TempDir()
	clock := hosttest.NewClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	p, err := host.NewProcess(host.Config{Package: host.Package{Name: m.Name, Dir: abs, Manifest: m}, StateRoot: state,
		Executable: exe, Service: host.NewService(host.ServiceConfig{Manifest: m, Store: st}), Store: st, Clock: clock})
	if err == nil {
		err = p.Start(ctx)
	}
	if err != nil {
		st.Close()
		return conformance.ExecutorTarget{}, err
	}
	executorDir := filepath.Join(state, "executors", x.Name)
	crashes := 0
	return conformance.ExecutorTarget{
		Executor: host.NewRemote(p).Executor(x.Name),
		// SIGKILL to the executor's group: its jobs, in groups of their
		// own, go on. The host restarts it on its (fake) clock.
		Crash: func(ctx context.Context) error {
			raw, err := os.ReadFile(filepath.Join(host.StateDir(state, m.Name), PIDFile))
			if err != nil {
				return err
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
			if err != nil {
				return err
			}
			gen := p.Generation()
			if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
				return err
			}
			crashes++
			if err := clock.WaitForRequests(ctx, crashes); err != nil {
				return err
			}
			clock.Advance(host.BackoffMax)
			for {
				changed := p.Ready() // closed at the next change of state
				if p.Generation() != gen {
					return nil
				}
				select {
				case <-changed:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		},
		Finish: func(ctx context.Context, executionID string, state runtime.ExecutionState) error {
			return x.finish(executorDir, executionID, state)
		},
		Close: func() error {
			err := p.Close(context.Background())
			x.KillAllJobs(executorDir)
			st.Close()
			return err
		},
	}, nil
}

// Hosting is one way conformance.RunExecutor reaches the executor.
type Hosting struct {
	Name string
	New  func(t *testing.T, ctx context.Context) (conformance.ExecutorTarget, error)
}

// Hostings are the two: attached in process, and as a host.Process.
func (x Executor) Hostings() []Hosting {
	return []Hosting{
		{"in_process", func(t *testing.T, ctx context.Context) (conformance.ExecutorTarget, error) {
			return x.InProcessTarget(t, ctx, x.Extension)
		}},
		{"process", x.processTarget},
	}
}
