package invoke_test

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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host/invoke"
)

// childRequest is a call of the child in mode, carrying a canary in its
// params and in its environment.
func childRequest(t *testing.T, mode string) invoke.Request {
	return invoke.Request{
		Dir:    pkgDir,
		Method: "validate",
		Params: json.RawMessage(`{"kind":"extension","type":"invokechild","config":{"token":"` + canaryParam + `"}}`),
		Env: []string{
			"INVOKE_CHILD_MODE=" + mode,
			"INVOKE_CHILD_STARTED=" + filepath.Join(t.TempDir(), "started"),
			"SECRET_TOKEN=" + canaryEnv,
		},
	}
}

// started reports the pid the child recorded when it started, 0 when it
// never did.
func started(t *testing.T, req invoke.Request) int {
	t.Helper()
	for _, kv := range req.Env {
		if f, ok := strings.CutPrefix(kv, "INVOKE_CHILD_STARTED="); ok {
			b, err := os.ReadFile(f)
			if errors.Is(err, os.ErrNotExist) {
				return 0
			}
			require.NoError(t, err)
			pid, err := strconv.Atoi(string(b))
			require.NoError(t, err)
			return pid
		}
	}
	t.Fatal("the request records no start")
	return 0
}

// fastLimits keeps the tests that wait for a limit short.
func fastLimits() invoke.Limits {
	l := invoke.DefaultLimits()
	l.WallTimeMS = 2000
	l.CleanupTimeMS = 1000
	return l
}

// assertNoEcho checks that err's text and JSON form hold no canary.
func assertNoEcho(t *testing.T, err error) {
	t.Helper()
	var e *invoke.Error
	require.ErrorAs(t, err, &e)
	b, jerr := json.Marshal(e)
	require.NoError(t, jerr)
	for _, text := range []string{err.Error(), string(b)} {
		for _, canary := range []string{canaryPath, canaryParam, canaryEnv, canaryRemote, pkgDir} {
			assert.NotContains(t, text, canary)
		}
	}
}

type childResult struct {
	Params json.RawMessage `json:"params"`
	Env    []string        `json:"env"`
	Cwd    string          `json:"cwd"`
	PID    int             `json:"pid"`
	PGID   int             `json:"pgid"`
	SID    int             `json:"sid"`
	FDs    []string        `json:"fds"`
}

func TestInvokeCallsOnceInAFreshIsolatedProcess(t *testing.T) {
	// A descriptor this process leaves inheritable (no close-on-exec):
	// the child must not get it.
	leak := filepath.Join(t.TempDir(), "inheritable-canary")
	require.NoError(t, os.WriteFile(leak, nil, 0o600))
	fd, err := syscall.Open(leak, syscall.O_RDONLY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Close(fd) })

	req := childRequest(t, "ok")
	var stages []string
	req.Progress = func(s string) { stages = append(stages, s) }
	resp, err := invoke.Invoke(context.Background(), req, invoke.DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, []string{"launch", "initialize", "configure", "call", "shutdown", "cleanup"}, stages)
	assert.Equal(t, "validate", resp.Method)
	assert.EqualValues(t, 1, resp.ProtocolVersion)
	assert.Positive(t, resp.StdoutBytes)

	var got childResult
	require.NoError(t, json.Unmarshal(resp.Result, &got))
	assert.JSONEq(t, string(req.Params), string(got.Params))
	assert.ElementsMatch(t, req.Env, got.Env, "the environment is exactly the request's")
	assert.Equal(t, got.PID, got.PGID, "a process group of its own")
	assert.Equal(t, got.PID, got.SID, "a session of its own")
	for _, target := range got.FDs {
		assert.NotContains(t, target, "inheritable-canary", "an inherited descriptor reached the process")
	}
	assert.Equal(t, "work", filepath.Base(got.Cwd), "a fresh working directory")
	assert.NotContains(t, got.Cwd, canaryPath, "not the package directory")
	_, err = os.Stat(got.Cwd)
	assert.ErrorIs(t, err, os.ErrNotExist, "the temporary directory is removed")
}

func TestInvokeAnswersTheExtensionsOwnRequestsUnsupported(t *testing.T) {
	resp, err := invoke.Invoke(context.Background(), childRequest(t, "calls-host"), invoke.DefaultLimits())
	require.NoError(t, err)
	var got struct {
		HostAnswer struct {
			ID    string `json:"id"`
			Error struct {
				Code int `json:"code"`
				Data struct {
					Code string `json:"code"`
				} `json:"data"`
			} `json:"error"`
		} `json:"host_answer"`
	}
	require.NoError(t, json.Unmarshal(resp.Result, &got))
	assert.Equal(t, "q1", got.HostAnswer.ID)
	assert.Equal(t, -32000, got.HostAnswer.Error.Code)
	assert.Equal(t, "unsupported", got.HostAnswer.Error.Data.Code)
}

func TestInvokeKillsOrdinaryDescendantsHoldingThePipes(t *testing.T) {
	// The child leaves a descendant in its group that holds stdout and
	// stderr open and answers normally: the group kill ends it, so the
	// streams end and the call succeeds well within the wall time.
	_, err := invoke.Invoke(context.Background(), childRequest(t, "descendant"), fastLimits())
	require.NoError(t, err)
}

// failure is one misbehaviour of the child and how it must end.
type failure struct {
	mode   string
	code   invoke.Code
	stream invoke.Stream
	limits func(*invoke.Limits)
	params func() json.RawMessage
}

var failures = []failure{
	{mode: "flood-stdout", code: invoke.CodeSizeLimit, stream: invoke.StreamStdout,
		limits: func(l *invoke.Limits) { l.MaxStdoutBytes = 16 << 10 }},
	{mode: "flood-stderr", code: invoke.CodeSizeLimit, stream: invoke.StreamStderr,
		limits: func(l *invoke.Limits) { l.MaxStderrBytes = 1000 }},
	{mode: "stderr-chatter", code: invoke.CodeSizeLimit, stream: invoke.StreamStderr,
		limits: func(l *invoke.Limits) { l.MaxStderrBytes = 0 }},
	// It stops reading stdin before the call, whose params fill the pipe:
	// the host's write must not block past the wall time.
	{mode: "stop-reading", code: invoke.CodeTimeout, limits: func(l *invoke.Limits) { l.WallTimeMS = 1000 },
		params: func() json.RawMessage {
			return json.RawMessage(`{"blob":"` + strings.Repeat("b", 900<<10) + `","token":"` + canaryParam + `"}`)
		}},
	// A second: time enough for the exchange to reach the stage each mode
	// misbehaves in on a loaded machine.
	{mode: "hang", code: invoke.CodeTimeout, limits: func(l *invoke.Limits) { l.WallTimeMS = 1000 }},
	{mode: "ignore-eof", code: invoke.CodeTimeout, limits: func(l *invoke.Limits) { l.WallTimeMS = 1000 }},
	{mode: "exit", code: invoke.CodePluginFailed},
	{mode: "app-error", code: invoke.CodePluginFailed},
	{mode: "fail-after-shutdown", code: invoke.CodePluginFailed},
	{mode: "mismatched-id", code: invoke.CodeProtocolInvalid},
	{mode: "garbage", code: invoke.CodeProtocolInvalid},
	{mode: "dup-keys", code: invoke.CodeProtocolInvalid},
	{mode: "bad-utf8", code: invoke.CodeProtocolInvalid},
	{mode: "lone-surrogate", code: invoke.CodeProtocolInvalid},
	{mode: "huge-number", code: invoke.CodeProtocolInvalid},
	{mode: "unknown-member", code: invoke.CodeProtocolInvalid},
	{mode: "member-case", code: invoke.CodeProtocolInvalid},
	{mode: "two-documents", code: invoke.CodeProtocolInvalid},
	{mode: "bad-manifest", code: invoke.CodeProtocolInvalid},
}

func TestInvokeEndsEachMisbehaviourInItsCode(t *testing.T) {
	for _, f := range failures {
		t.Run(f.mode, func(t *testing.T) {
			lim := fastLimits()
			if f.limits != nil {
				f.limits(&lim)
			}
			req := childRequest(t, f.mode)
			if f.params != nil {
				req.Params = f.params()
			}
			resp, err := invoke.Invoke(context.Background(), req, lim)
			require.Error(t, err)
			assert.Equal(t, f.code, invoke.CodeOf(err), "%v", err)
			assert.ErrorIs(t, err, invoke.Sentinel(f.code))
			var e *invoke.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, f.stream, e.Stream)
			assert.False(t, e.Detached)
			assert.Nil(t, e.Cleanup, "cleanup succeeded")
			assertNoEcho(t, err)
			assert.Nil(t, resp.Result, "no result is accepted from a failed exchange")
			assert.NotZero(t, started(t, req), "the child ran")
			switch f.stream {
			case invoke.StreamStdout:
				assert.Equal(t, lim.MaxStdoutBytes+1, resp.StdoutBytes, "read to the first excess byte and no further")
			case invoke.StreamStderr:
				assert.Equal(t, lim.MaxStderrBytes+1, resp.StderrBytes, "read to the first excess byte and no further")
			}
		})
	}
}

func TestInvokeReportsADetachedDescendantWithoutKillingIt(t *testing.T) {
	req := childRequest(t, "detach")
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	req.Env = append(req.Env, "INVOKE_CHILD_PIDFILE="+pidFile)
	lim := fastLimits()
	// The wall time must outlast the exchange on a loaded machine: the
	// timeout is meant to come while the detached descendant holds stdout.
	lim.WallTimeMS, lim.CleanupTimeMS = 3000, 200
	_, err := invoke.Invoke(context.Background(), req, lim)

	b, rerr := os.ReadFile(pidFile)
	require.NoError(t, rerr, "the grandchild was started")
	pid, rerr := strconv.Atoi(string(b))
	require.NoError(t, rerr)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })

	require.Error(t, err)
	assert.ErrorIs(t, err, invoke.ErrTimeout, "it held stdout open past the wall time")
	var e *invoke.Error
	require.ErrorAs(t, err, &e)
	assert.True(t, e.Detached, "%v", err)
	assert.Nil(t, e.Cleanup)
	assert.Contains(t, err.Error(), "was not killed")
	assert.NoError(t, syscall.Kill(pid, 0), "the detached descendant is still alive: the host did not kill it, and says so")
	assertNoEcho(t, err)
}

func TestInvokeCancelled(t *testing.T) {
	t.Run("before the launch", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := childRequest(t, "ok")
		_, err := invoke.Invoke(ctx, req, invoke.DefaultLimits())
		assert.ErrorIs(t, err, invoke.ErrCancelled)
		assert.Zero(t, started(t, req), "nothing was started")
	})
	t.Run("during the call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req := childRequest(t, "hang")
		req.Progress = func(stage string) {
			if stage == "call" {
				cancel()
			}
		}
		lim := invoke.DefaultLimits() // ten seconds: only the cancellation ends it soon
		_, err := invoke.Invoke(ctx, req, lim)
		assert.ErrorIs(t, err, invoke.ErrCancelled)
		assert.NotErrorIs(t, err, invoke.ErrTimeout)
		pid := started(t, req)
		require.NotZero(t, pid)
		assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the child is gone")
		assertNoEcho(t, err)
	})
}

func TestInvokeReportsACleanupFailureAfterAnotherError(t *testing.T) {
	signalled := 0
	restore := invoke.SetKillGroup(func(int, syscall.Signal) error { signalled++; return syscall.EPERM })
	defer restore()
	// The first error is a cancellation during the call; then the group
	// cannot be signalled, so the hanging child is not reaped either.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := childRequest(t, "hang")
	req.Progress = func(stage string) {
		if stage == "call" {
			cancel()
		}
	}
	lim := fastLimits()
	lim.CleanupTimeMS = 200
	_, err := invoke.Invoke(ctx, req, lim)
	pid := started(t, req)
	require.NotZero(t, pid)
	syscall.Kill(-pid, syscall.SIGKILL) // what the failed cleanup could not do

	require.Error(t, err)
	assert.Equal(t, invoke.CodeCancelled, invoke.CodeOf(err), "the first error keeps its code")
	assert.ErrorIs(t, err, invoke.ErrCancelled)
	assert.ErrorIs(t, err, invoke.ErrCleanupFailed, "and the cleanup failure is reported too")
	var e *invoke.Error
	require.ErrorAs(t, err, &e)
	require.NotNil(t, e.Cleanup)
	assert.Contains(t, e.Cleanup.Message, "could not be signalled")
	assert.Contains(t, e.Cleanup.Message, "not reaped")
	assert.False(t, e.Detached, "an unreaped process is not taken for a detached descendant")
	assert.Positive(t, signalled)
	assertNoEcho(t, err)
}

func TestInvokeReportsACleanupFailureAfterASuccessfulCall(t *testing.T) {
	restore := invoke.SetKillGroup(func(int, syscall.Signal) error { return syscall.EPERM })
	defer restore()
	resp, err := invoke.Invoke(context.Background(), childRequest(t, "ok"), fastLimits())
	assert.Equal(t, invoke.CodeCleanupFailed, invoke.CodeOf(err))
	assert.NotEmpty(t, resp.Result, "the answer is still returned")
}

func TestInvokeRefusesBeforeTheLaunch(t *testing.T) {
	missing := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(missing, "open-conduit-extension.json"), []byte(childManifest), 0o644))
	notExec := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(notExec, "open-conduit-extension.json"), []byte(childManifest), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(notExec, "child"), []byte("#!/bin/sh\n"), 0o644))
	badManifest := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(badManifest, "open-conduit-extension.json"), []byte(`{"name":"`+canaryPath+`"`), 0o644))

	cases := []struct {
		name   string
		code   invoke.Code
		stream invoke.Stream
		edit   func(*invoke.Request, *invoke.Limits)
	}{
		{"unknown method", invoke.CodeInvalidInvocation, "", func(r *invoke.Request, _ *invoke.Limits) { r.Method = "no.such-" + canaryParam }},
		{"lifecycle method", invoke.CodeInvalidInvocation, "", func(r *invoke.Request, _ *invoke.Limits) { r.Method = "initialize" }},
		{"extension-to-host method", invoke.CodeInvalidInvocation, "", func(r *invoke.Request, _ *invoke.Limits) { r.Method = "kv.get" }},
		{"notification", invoke.CodeInvalidInvocation, "", func(r *invoke.Request, _ *invoke.Limits) { r.Method = "$/cancel" }},
		{"method the manifest does not enable", invoke.CodeInvalidInvocation, "", func(r *invoke.Request, _ *invoke.Limits) { r.Method = "check.run" }},
		{"params not an object", invoke.CodeInvalidInvocation, "", func(r *invoke.Request, _ *invoke.Limits) { r.Params = json.RawMessage(`["` + canaryParam + `"]`) }},
		{"params with a duplicate member", invoke.CodeInvalidInvocation, "", func(r *invoke.Request, _ *invoke.Limits) {
			r.Params = json.RawMessage(`{"a":"` + canaryParam + `","a":1}`)
		}},
		{"environment entry without a name", invoke.CodeInvalidInvocation, "", func(r *invoke.Request, _ *invoke.Limits) { r.Env = append(r.Env, canaryEnv) }},
		{"environment name set twice", invoke.CodeInvalidInvocation, "", func(r *invoke.Request, _ *invoke.Limits) { r.Env = append(r.Env, "SECRET_TOKEN="+canaryEnv) }},
		{"limit out of range", invoke.CodeInvalidInvocation, "", func(_ *invoke.Request, l *invoke.Limits) { l.CleanupTimeMS = 5001 }},
		{"limits never filled in", invoke.CodeInvalidInvocation, "", func(_ *invoke.Request, l *invoke.Limits) { *l = invoke.Limits{} }},
		{"no manifest", invoke.CodeInvalidInvocation, "", func(r *invoke.Request, _ *invoke.Limits) { r.Dir = t.TempDir() }},
		{"invalid manifest", invoke.CodeInvalidInvocation, "", func(r *invoke.Request, _ *invoke.Limits) { r.Dir = badManifest }},
		{"program missing", invoke.CodePrerequisiteMissing, "", func(r *invoke.Request, _ *invoke.Limits) { r.Dir = missing }},
		{"program not executable", invoke.CodePrerequisiteMissing, "", func(r *invoke.Request, _ *invoke.Limits) { r.Dir = notExec }},
		{"request over max_request_bytes", invoke.CodeSizeLimit, invoke.StreamRequest, func(_ *invoke.Request, l *invoke.Limits) { l.MaxRequestBytes = 100 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, lim := childRequest(t, "ok"), invoke.DefaultLimits()
			c.edit(&req, &lim)
			_, err := invoke.Invoke(context.Background(), req, lim)
			require.Error(t, err)
			assert.Equal(t, c.code, invoke.CodeOf(err), "%v", err)
			var e *invoke.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, c.stream, e.Stream)
			assertNoEcho(t, err)
			assert.Zero(t, started(t, req), "nothing was started")
		})
	}
}

func TestEveryCodeHasAFailureTest(t *testing.T) {
	// Each code is driven above: by a misbehaving child, a refusal before
	// the launch, a cancellation or a failed cleanup.
	covered := map[invoke.Code]bool{invoke.CodeInvalidInvocation: true, invoke.CodePrerequisiteMissing: true,
		invoke.CodeCancelled: true, invoke.CodeCleanupFailed: true}
	for _, f := range failures {
		covered[f.code] = true
	}
	for _, c := range invoke.Codes() {
		assert.True(t, covered[c], "no test drives %s", c)
	}
	assert.Len(t, covered, len(invoke.Codes()))
}
