package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/runtime"
)

func TestEnvironmentIsTheBaselinePlusGrants(t *testing.T) {
	daemon := []string{"PATH=/bin", "HOME=/h", "LC_ALL=C", "TERM=xterm", "SECRET_TOKEN=hunter2",
		"OPEN_CONDUIT_STATE=/s", "GRANTED=yes", "AWS_SECRET_ACCESS_KEY=k", "NOEQUALS"}
	got := host.Environment(daemon, []string{"GRANTED", "MISSING"})
	assert.ElementsMatch(t, []string{"PATH=/bin", "HOME=/h", "LC_ALL=C", "TERM=xterm", "GRANTED=yes"}, got)
}

// TestProcessEnvSecretDoesNotReachChild proves that a secret in the
// daemon's environment does not reach the extension, while the baseline
// and a granted variable do, and that the command runs in the package
// directory.
func TestProcessEnvSecretDoesNotReachChild(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("envy", manifestJSON("envy", "good", nil, nil), func(c *host.Config) {
		c.Environ = func() []string {
			return []string{"PATH=" + os.Getenv("PATH"), "HOME=/nowhere", "SECRET_TOKEN=hunter2", "GRANTED=yes"}
		}
		c.PassEnv = []string{"GRANTED"}
	})
	require.NoError(t, p.Start(ctxT(t)))
	var res struct {
		Env []string `json:"env"`
		Dir string   `json:"dir"`
	}
	require.NoError(t, p.Call(ctxT(t), "test.env", nil, &res))
	assert.Contains(t, res.Env, "GRANTED=yes")
	assert.Contains(t, res.Env, "HOME=/nowhere")
	for _, kv := range res.Env {
		assert.NotContains(t, kv, "hunter2")
		assert.False(t, strings.HasPrefix(kv, "SECRET_TOKEN="))
	}
	want, _ := filepath.EvalSymlinks(filepath.Join(f.root, "envy"))
	got, _ := filepath.EvalSymlinks(res.Dir)
	assert.Equal(t, want, got)
	assert.NotContains(t, readLog(t, f.state, "envy"), "hunter2")
}

func TestProcessHandshakeSendsConfigureAndStateDir(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("notes", manifestJSON("notes", "good", notesProvides("notes"), map[string]any{"kv_version": 2}))
	require.NoError(t, p.Start(ctxT(t)))
	st, _, _ := p.Status()
	assert.Equal(t, host.Running, st)
	raw, err := os.ReadFile(filepath.Join(f.root, "notes", "configured.json"))
	require.NoError(t, err)
	var cp protocol.ConfigureParams
	require.NoError(t, json.Unmarshal(raw, &cp))
	assert.Equal(t, protocol.KVLayout{Stored: 0, Declared: 2}, cp.KV)
	assert.DirExists(t, host.StateDir(f.state, "notes"))
	require.NoError(t, p.Close(ctxT(t)))
	require.NoError(t, p.Close(ctxT(t)), "Close twice")
	assert.Contains(t, readLog(t, f.state, "notes"), "child good started")
}

// TestFaultCrashMidCall: a process that exits while serving a call fails
// that call with a transport error (never a hang or an authored error),
// the supervisor restarts it after the first backoff step and re-runs the
// handshake, and later calls succeed.
func TestFaultCrashMidCall(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("crashy", manifestJSON("crashy", "good", nil, nil))
	require.NoError(t, p.Start(ctxT(t)))
	err := p.Call(ctxT(t), "test.crash", nil, nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, jsonrpc.ErrTransport)
	require.NoError(t, f.clock.WaitForRequests(ctxT(t), 1))
	assert.Equal(t, []time.Duration{host.BackoffMin}, f.clock.Requested())
	f.clock.Advance(host.BackoffMin)
	var echo []string
	require.NoError(t, p.Call(ctxT(t), "test.echo", []string{"again"}, &echo))
	assert.Equal(t, []string{"again"}, echo)
	_, restarts, _ := p.Status()
	assert.Equal(t, 1, restarts)
	assert.Contains(t, readLog(t, f.state, "crashy"), "process ended")
}

// TestFaultPartialResponseThenExit: half a response line followed by exit
// is a transport error, not a decoded answer, and the process restarts.
func TestFaultPartialResponseThenExit(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("partial", manifestJSON("partial", "good", nil, nil))
	require.NoError(t, p.Start(ctxT(t)))
	var out json.RawMessage
	err := p.Call(ctxT(t), "test.partial", nil, &out)
	require.ErrorIs(t, err, jsonrpc.ErrTransport)
	assert.Nil(t, out)
	require.NoError(t, f.clock.WaitForRequests(ctxT(t), 1))
	f.clock.Advance(host.BackoffMin)
	require.NoError(t, p.Call(ctxT(t), "test.echo", []int{1}, nil))
}

// TestFaultStrayStdout: a line on stdout that is not JSON-RPC breaks the
// connection (pending calls fail with a transport error), the host kills
// the process and restarts it, and logs the protocol error.
func TestFaultStrayStdout(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("stray", manifestJSON("stray", "good", nil, nil))
	require.NoError(t, p.Start(ctxT(t)))
	err := p.Call(ctxT(t), "test.stray", nil, nil)
	require.ErrorIs(t, err, jsonrpc.ErrTransport)
	require.NoError(t, f.clock.WaitForRequests(ctxT(t), 1))
	f.clock.Advance(host.BackoffMin)
	require.NoError(t, p.Call(ctxT(t), "test.echo", []int{1}, nil))
	assert.Contains(t, readLog(t, f.state, "stray"), "protocol")
}

// TestFaultHangPastInTxDeadline: an in-transaction call the extension
// never answers ends at the hard deadline with a retryable error, and a
// callback to the host while it is outstanding is reentrant_call.
func TestFaultHangPastInTxDeadline(t *testing.T) {
	f := newFixture(t)
	p, svc := f.process("hang", manifestJSON("hang", "good", nil, nil))
	require.NoError(t, p.Start(ctxT(t)))
	done := make(chan error, 1)
	go func() { done <- p.CallInTx(context.Background(), "test.hang", nil, nil) }()
	var reentrant error
	// The service refuses callbacks while the call is outstanding.
	for reentrant == nil || !errors.Is(reentrant, protocol.ErrReentrantCall) {
		select {
		case err := <-done:
			t.Fatalf("the in-transaction call ended before the callback was refused: %v", err)
		default:
		}
		reentrant = svc.Call(ctxT(t), "kv.get", protocol.KVGetParams{Namespace: "hang", Key: "k"}, nil)
	}
	err := <-done
	require.ErrorIs(t, err, host.ErrRetryable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, svc.Call(ctxT(t), "kv.get", protocol.KVGetParams{Namespace: "hang", Key: "k"}, nil))
	// Not running: an in-transaction call does not wait for a restart.
	require.NoError(t, p.Close(ctxT(t)))
	assert.ErrorIs(t, p.CallInTx(ctxT(t), "test.echo", nil, nil), host.ErrRetryable)
}

// TestFaultRefusalsAreNotRestarted: a version mismatch, a manifest
// mismatch, a KV downgrade, a registration outside the namespace and a
// source in a scope the package is not configured in are deterministic
// refusals: Start returns ErrRefused, the package stays
// refused, the supervisor never schedules a restart, and the log says why.
func TestFaultRefusalsAreNotRestarted(t *testing.T) {
	for _, tc := range []struct {
		name, mode string
		kv         int
		want       error
	}{
		{"bad-version", "bad-version", 0, protocol.ErrUnsupportedProtocolVersion},
		{"no-version", "no-version", 0, protocol.ErrUnsupportedProtocolVersion},
		{"bad-manifest", "bad-manifest", 0, nil},
		{"kv-downgrade", "good", 1, protocol.ErrKVDowngrade},
		{"bad-register", "bad-register", 0, protocol.ErrUnauthorized},
		{"foreign-scope", "foreign-scope", 0, protocol.ErrUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			name := "ref-" + strings.ReplaceAll(tc.name, "_", "-")
			if tc.kv > 0 {
				// A newer release recorded layout 2; this one declares 1.
				require.NoError(t, f.store.Transact(ctxT(t), func(tx runtimeTx) error {
					return putLayout(tx, name, 2)
				}))
			}
			p, _ := f.process(name, manifestJSON(name, tc.mode, nil, map[string]any{"kv_version": tc.kv}))
			err := p.Start(ctxT(t))
			require.ErrorIs(t, err, host.ErrRefused)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			st, restarts, _ := p.Status()
			assert.Equal(t, host.Refused, st)
			assert.Zero(t, restarts)
			assert.Empty(t, f.clock.Requested(), "a refusal is never restarted")
			assert.ErrorIs(t, p.Call(ctxT(t), "test.echo", nil, nil), host.ErrRefused)
			assert.Contains(t, readLog(t, f.state, name), "refused")
		})
	}
}

// TestBackoffDoublesToItsCap: a package that fails every start is retried
// after 100 ms, 200 ms, … up to 30 s, on the fake clock.
func TestBackoffDoublesToItsCap(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("failing", manifestJSON("failing", "fail-start", nil, nil))
	require.Error(t, p.Start(ctxT(t)))
	want := []time.Duration{}
	d := host.BackoffMin
	for range 11 {
		want = append(want, d)
		require.NoError(t, f.clock.WaitForRequests(ctxT(t), len(want)))
		assert.Equal(t, want, f.clock.Requested())
		f.clock.Advance(d)
		d = min(2*d, host.BackoffMax)
	}
	assert.Equal(t, host.BackoffMax, want[len(want)-1])
	assert.Contains(t, readLog(t, f.state, "failing"), "failing at start")
}

// TestBackoffResetsAfterAMinuteUp: a crash after a minute of uptime
// restarts after the first step again.
func TestBackoffResetsAfterAMinuteUp(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("steady", manifestJSON("steady", "good", nil, nil))
	require.NoError(t, p.Start(ctxT(t)))
	require.Error(t, p.Call(ctxT(t), "test.crash", nil, nil))
	require.NoError(t, f.clock.WaitForRequests(ctxT(t), 1))
	f.clock.Advance(host.BackoffMin)
	require.NoError(t, p.Call(ctxT(t), "test.echo", []int{1}, nil))
	// Crash again at once: the backoff doubled.
	require.Error(t, p.Call(ctxT(t), "test.crash", nil, nil))
	require.NoError(t, f.clock.WaitForRequests(ctxT(t), 2))
	f.clock.Advance(2 * host.BackoffMin)
	require.NoError(t, p.Call(ctxT(t), "test.echo", []int{1}, nil))
	// Up for a minute, then crash: back to the first step.
	f.clock.Advance(host.BackoffReset)
	require.Error(t, p.Call(ctxT(t), "test.crash", nil, nil))
	require.NoError(t, f.clock.WaitForRequests(ctxT(t), 3))
	assert.Equal(t, []time.Duration{host.BackoffMin, 2 * host.BackoffMin, host.BackoffMin}, f.clock.Requested())
}

func TestCallWaitsBoundedByItsContext(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("waiter", manifestJSON("waiter", "good", nil, nil))
	require.NoError(t, p.Start(ctxT(t)))
	require.Error(t, p.Call(ctxT(t), "test.crash", nil, nil))
	require.NoError(t, f.clock.WaitForRequests(ctxT(t), 1))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Call(ctx, "test.echo", []int{1}, nil) }()
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
}

// TestCloseKillsAnExtensionThatIgnoresSIGTERM: shutdown, end of stdin and
// SIGTERM are ignored; SIGKILL to the group ends it and it is reaped.
func TestCloseKillsAnExtensionThatIgnoresSIGTERM(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("stubborn", manifestJSON("stubborn", "ignore-sigterm", nil, nil), func(c *host.Config) {
		c.ShutdownGrace, c.TermGrace = 50*time.Millisecond, 50*time.Millisecond
	})
	require.NoError(t, p.Start(ctxT(t)))
	require.NoError(t, p.Close(ctxT(t)))
	log := readLog(t, f.state, "stubborn")
	assert.Contains(t, log, "SIGTERM")
	assert.Contains(t, log, "SIGKILL")
}

// TestCloseReportsADetachedDescendant: a grandchild in its own session
// that keeps stderr open is reported, not claimed killed.
func TestCloseReportsADetachedDescendant(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("detacher", manifestJSON("detacher", "detach", nil, nil), func(c *host.Config) {
		c.ReapTimeout = 200 * time.Millisecond
	})
	require.NoError(t, p.Start(ctxT(t)))
	pidText, err := os.ReadFile(filepath.Join(f.root, "detacher", "detached.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(string(pidText))
	require.NoError(t, err)
	defer syscall.Kill(pid, syscall.SIGKILL)
	err = p.Close(ctxT(t))
	assert.ErrorIs(t, err, host.ErrDetachedDescendant)
	assert.NoError(t, syscall.Kill(pid, 0), "the detached descendant was not killed by the host")
}

func TestStderrLogIsBoundedWithAMarker(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("flood", manifestJSON("flood", "stderr-flood", nil, nil))
	require.NoError(t, p.Start(ctxT(t)))
	require.NoError(t, p.Close(ctxT(t)))
	log := readLog(t, f.state, "flood")
	assert.LessOrEqual(t, int64(len(log)), host.LogLimit+int64(len(host.LogTruncatedMarker)))
	assert.Contains(t, log, strings.TrimSpace(host.LogTruncatedMarker))
}

// TestStartAllRunsHandshakesTogether: each child waits in initialize
// until all three are in their handshake, so the start succeeds only if
// the host runs the handshakes at once rather than one after another.
func TestStartAllRunsHandshakesTogether(t *testing.T) {
	f := newFixture(t)
	var procs []*host.Process
	for _, n := range []string{"one", "two", "three"} {
		p, _ := f.process(n, manifestJSON(n, "rendezvous-3", nil, nil))
		procs = append(procs, p)
	}
	for i, err := range host.StartAll(ctxT(t), procs) {
		assert.NoError(t, err, procs[i].Name())
	}
}

// TestFaultReentrantCallOverTheWire: an extension that calls the host
// while serving an in-transaction call is refused with reentrant_call.
func TestFaultReentrantCallOverTheWire(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("reenter", manifestJSON("reenter", "good", nil, nil))
	require.NoError(t, p.Start(ctxT(t)))
	var res struct {
		Code string `json:"code"`
	}
	require.NoError(t, p.CallInTx(ctxT(t), "test.reenter", nil, &res))
	assert.Equal(t, string(protocol.CodeReentrantCall), res.Code)
	// Outside an in-transaction call the same callback is served.
	require.NoError(t, p.Call(ctxT(t), "test.reenter", nil, &res))
	assert.NotEqual(t, string(protocol.CodeReentrantCall), res.Code)
	assert.Contains(t, readLog(t, f.state, "reenter"), "refused kv.get")
}

func TestReconfigureWithoutRestart(t *testing.T) {
	f := newFixture(t)
	scope := "s1"
	p, svc := f.process("recon", manifestJSON("recon", "good", nil, nil), func(c *host.Config) {
		c.Configure = func() protocol.ConfigureParams {
			return protocol.ConfigureParams{Entries: []protocol.ConfigEntry{{ScopeID: scope, ID: "e", Type: "recon"}}}
		}
	})
	require.NoError(t, p.Start(ctxT(t)))
	assert.Equal(t, []string{"s1"}, svc.Scopes())
	scope = "s2"
	require.NoError(t, p.Reconfigure(ctxT(t)))
	assert.Equal(t, []string{"s2"}, svc.Scopes())
	assert.Equal(t, uint64(1), p.Generation(), "no restart")
	raw, err := os.ReadFile(filepath.Join(f.root, "recon", "configured.json"))
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"s2"`)
}

// TestNothingServedBeforeInitialize: a process that calls the host while
// the host waits for its initialize answer (kv.commit, KV and state reads,
// each awaited before it answers) gets unauthorized for every one, and
// nothing it sent is applied, not even a kv.commit notification. Once the
// handshake has succeeded the same commit is served.
func TestNothingServedBeforeInitialize(t *testing.T) {
	f := newFixture(t)
	p, _ := f.process("early", manifestJSON("early", "early-calls", nil, nil))
	require.NoError(t, p.Start(ctxT(t)))

	raw, err := os.ReadFile(filepath.Join(f.root, "early", "early.json"))
	require.NoError(t, err, "the child recorded no answers to its early calls")
	var codes map[string]string
	require.NoError(t, json.Unmarshal(raw, &codes))
	want := map[string]string{}
	for _, c := range earlyCalls("early") {
		want[c.Method] = string(protocol.CodeUnauthorized)
	}
	assert.Equal(t, want, codes, "the code each call before the initialize answer got")
	assert.Empty(t, kvEntries(t, f.store, "early"), "a call before the handshake was applied")

	// The gate is open now: the same commit is applied.
	require.NoError(t, p.Call(ctxT(t), "test.call", map[string]any{"method": "kv.commit",
		"params": protocol.KVCommitParams{Puts: []protocol.KVPut{{Namespace: "early", Key: "late", Value: json.RawMessage(`1`)}}}}, nil))
	assert.Equal(t, []string{"late"}, kvEntries(t, f.store, "early"))
}

// kvEntries lists the keys the store holds in namespace ns.
func kvEntries(t *testing.T, st runtime.Store, ns string) []string {
	t.Helper()
	var keys []string
	require.NoError(t, st.View(ctxT(t), func(tx runtime.ReadTx) error {
		es, err := tx.KVList(ns, "", "", runtime.MaxPageLimit)
		for _, e := range es {
			keys = append(keys, e.Key)
		}
		return err
	}))
	return keys
}

// TestHandshakeGateJudgesByStreamOrder: the gate refuses a request read
// before it opened even when its handler starts after, and serves the
// ones read after; before it opens it refuses all and drops
// notifications.
func TestHandshakeGateJudgesByStreamOrder(t *testing.T) {
	served := 0
	inner := jsonrpc.HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) { served++; return "ok", nil })
	gate, openAfter := host.HandshakeGate("early", inner)
	call := func(seq uint64) error {
		_, err := gate.Handle(context.Background(), &jsonrpc.Request{Method: "kv.commit", Seq: seq})
		return err
	}
	assert.ErrorIs(t, call(1), protocol.ErrUnauthorized, "before the handshake")
	_, err := gate.Handle(context.Background(), &jsonrpc.Request{Method: "kv.commit", Notification: true})
	assert.NoError(t, err)
	openAfter(3)
	for _, seq := range []uint64{2, 3} {
		assert.ErrorIs(t, call(seq), protocol.ErrUnauthorized, "request %d was read before the gate opened", seq)
	}
	assert.NoError(t, call(4))
	assert.Equal(t, 1, served, "only the request read after the handshake reached the service")
}
