package shell_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/extensions/shell"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/host/hosttest"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// finish ends the job of an execution under executorDir as the work
// itself would: its default command exits with the status it reads.
func finish(executorDir, executionID string, state runtime.ExecutionState) error {
	status := "0"
	if state != runtime.ExecutionSucceeded {
		status = "1"
	}
	metas, err := filepath.Glob(filepath.Join(executorDir, "runs", "*", shell.MetaFile))
	if err != nil {
		return err
	}
	for _, path := range metas {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var rec shell.Recovery
		if err := json.Unmarshal(data, &rec); err != nil {
			return err
		}
		if rec.ExecutionID == executionID {
			return writeInput(rec, status)
		}
	}
	return fmt.Errorf("no run of execution %q under %s", executionID, executorDir)
}

// killAllJobs kills every job started under executorDir.
func killAllJobs(executorDir string) {
	metas, _ := filepath.Glob(filepath.Join(executorDir, "runs", "*", shell.MetaFile))
	for _, path := range metas {
		data, _ := os.ReadFile(path)
		var rec shell.Recovery
		if json.Unmarshal(data, &rec) == nil && rec.PGID > 0 {
			killGroup(rec.PGID)
		}
	}
}

func manifest(t *testing.T) *protocol.Manifest {
	m, err := protocol.ParseManifest(shell.Extension().Manifest)
	require.NoError(t, err)
	return m
}

// crashable is the executor attached in process, where a crash is a new
// executor value taking over and every call in flight on the old one
// failing as a broken pipe would.
type crashable struct {
	mk  func() *sdk.Extension
	svc *host.Service
	m   *protocol.Manifest
	// root is the host's state directory: the executor keeps its runs under
	// its executor directory there.
	root string

	mu      sync.Mutex
	gen     uint64
	ext     sdk.Caller
	current context.Context
	crash   context.CancelFunc
}

func newCrashable(ctx context.Context, t *testing.T, mk func() *sdk.Extension, svc *host.Service, root string) (*crashable, error) {
	c := &crashable{mk: mk, svc: svc, m: manifest(t), root: root}
	return c, c.attach(ctx)
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

type executorHosting struct {
	name string
	new  func(t *testing.T, ctx context.Context) (conformance.ExecutorTarget, error)
}

// inProcessTarget is the executor mk makes, attached in process.
func inProcessTarget(t *testing.T, ctx context.Context, mk func() *sdk.Extension) (conformance.ExecutorTarget, error) {
	root := t.TempDir()
	dir := host.InitializeParams(root, manifest(t)).ExecutorDirs[shell.Name]
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		return conformance.ExecutorTarget{}, err
	}
	svc := host.NewService(host.ServiceConfig{Manifest: manifest(t), Store: st})
	c, err := newCrashable(ctx, t, mk, svc, root)
	if err != nil {
		st.Close()
		return conformance.ExecutorTarget{}, err
	}
	return conformance.ExecutorTarget{
		Executor: host.NewRemote(c).Executor(shell.Name),
		Crash:    c.Crash,
		Finish: func(ctx context.Context, executionID string, state runtime.ExecutionState) error {
			return finish(dir, executionID, state)
		},
		Close: func() error {
			killAllJobs(dir)
			return st.Close()
		},
	}, nil
}

var executorHostings = []executorHosting{
	{"in_process", func(t *testing.T, ctx context.Context) (conformance.ExecutorTarget, error) {
		return inProcessTarget(t, ctx, shell.Extension)
	}},
	{"process", func(t *testing.T, ctx context.Context) (conformance.ExecutorTarget, error) {
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
		m := manifest(t)
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
		executorDir := filepath.Join(state, "executors", shell.Name)
		crashes := 0
		return conformance.ExecutorTarget{
			Executor: host.NewRemote(p).Executor(shell.Name),
			// SIGKILL to the executor's group: its jobs, in groups of their
			// own, go on. The host restarts it on its (fake) clock.
			Crash: func(ctx context.Context) error {
				raw, err := os.ReadFile(filepath.Join(host.StateDir(state, m.Name), pidFile))
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
				return finish(executorDir, executionID, state)
			},
			Close: func() error {
				err := p.Close(context.Background())
				killAllJobs(executorDir)
				st.Close()
				return err
			},
		}, nil
	}},
}

// TestExecutorSuite runs the shared executor suite against the executor,
// hosted both ways.
func TestExecutorSuite(t *testing.T) {
	for _, h := range executorHostings {
		t.Run(h.name, func(t *testing.T) {
			conformance.RunExecutor(t, conformance.ExecutorDriver{
				New:      func(ctx context.Context) (conformance.ExecutorTarget, error) { return h.new(t, ctx) },
				NewStore: func() (runtime.Store, error) { return sqlite.Open(t.TempDir()) },
			})
		})
	}
}

// TestExecutorSuiteCatchesAWeakenedShell: an executor that adopts whatever
// metadata it is given fails the suite that passes the executor.
func TestExecutorSuiteCatchesAWeakenedShell(t *testing.T) {
	old := conformance.ExecutorCheckTimeout
	conformance.ExecutorCheckTimeout = 3 * time.Second
	t.Cleanup(func() { conformance.ExecutorCheckTimeout = old })
	credulous := func() *sdk.Extension {
		ext := shell.Extension()
		x := ext.Executors[shell.Name]
		x.Recover = func(ctx context.Context, h *sdk.Host, p protocol.ExecutorRecoverParams) (protocol.ExecutorRecoverResult, error) {
			return protocol.ExecutorRecoverResult{}, nil
		}
		ext.Executors[shell.Name] = x
		return ext
	}
	err := conformance.CheckExecutor(t.Context(), conformance.ExecutorDriver{
		New: func(ctx context.Context) (conformance.ExecutorTarget, error) {
			return inProcessTarget(t, ctx, credulous)
		},
		NewStore: func() (runtime.Store, error) { return sqlite.Open(t.TempDir()) },
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "recover_unknown_not_adoptable")
}
