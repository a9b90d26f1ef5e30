package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/daemontest"
	"github.com/open-conduit/open-conduit/internal/testbin"
)

// The packages the lifecycle tests install, from this checkout.
var (
	notesDir  = filepath.Join("..", "..", "extensions", "notes")
	runnerDir = filepath.Join("..", "..", "extensions", "runner")
)

// notesConfig is a configuration with one scope using notes.
const notesConfig = `{
  "scopes": [
    {
      "id": "home",
      "title": "Home",
      "entries": [{"id": "inbox", "type": "notes", "config": {"digest": "07:30"}}],
      "routes": [{"id": "review", "handler": "notes", "kind": "notes-review", "config": {"tag": "todo"}}]
    }
  ]
}`

func serveContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestServeWithoutConfigRunsTheEmptyConfiguration(t *testing.T) {
	ctx := serveContext(t)
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t)})
	st, err := d.Client.Status(ctx)
	require.NoError(t, err)
	assert.True(t, st.Ready)
	assert.Zero(t, st.Generation.Number, "nothing applied: generation 0")
	assert.Equal(t, d.StateDir, st.Paths.State)
	assert.Equal(t, filepath.Join(d.StateDir, "api.sock"), st.Paths.Socket)
	assert.NoError(t, d.WaitStderr("no configuration file: running the empty configuration"), "it says so")
	assert.Contains(t, d.Stdout(), "API:      "+st.Paths.Socket)

	info, err := os.Stat(st.Paths.Socket)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "only the operator's user may connect")

	require.NoError(t, d.Stop(), "SIGTERM ends serve with status 0")
	assert.Contains(t, d.Stdout(), "open-conduit serve: stopped")
	_, err = os.Stat(st.Paths.Socket)
	assert.ErrorIs(t, err, os.ErrNotExist, "the socket is removed on shutdown")
}

func TestServeSecondDaemonIsRefusedByTheLock(t *testing.T) {
	first := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t)})
	second, err := daemontest.Launch(t, daemontest.Options{Binary: daemonBinary(t), ConfigDir: first.ConfigDir, StateDir: first.StateDir})
	require.NoError(t, err)
	err = second.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the second serve exits at once with a failure")
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, second.Stderr(), fmt.Sprintf("pid %d holds", first.Cmd.Process.Pid), "it names the holder's PID")
	_, err = first.Client.Status(serveContext(t))
	assert.NoError(t, err, "the first daemon keeps serving")
}

// A valid configuration is applied without a restart; a refused one
// reports every diagnostic and the running generation keeps serving; a
// restart keeps the generation; SIGHUP reloads config.json.
func TestServeConfigGenerations(t *testing.T) {
	ctx := serveContext(t)
	bin := daemonBinary(t)
	d := daemontest.Start(t, daemontest.Options{Binary: bin, Packages: []string{notesDir}})
	pid := notesPID(t, d)

	gen, err := d.Client.ApplyConfig(ctx, []byte(notesConfig))
	require.NoError(t, err)
	assert.Equal(t, int64(1), gen.Number)
	assert.Equal(t, notesPID(t, d), pid, "applied without restarting the package")
	scopes, err := d.Client.Scopes(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"home"}, scopeIDs(scopes))

	bad := `{"scopes": [{"id": "home", "entries": [{"id": "inbox", "type": "notes", "config": {"digest": "25:99"}}],
	  "routes": [{"handler": "nope", "kind": "notes-review", "binding": "missing"}]}],
	  "connections": [{"name": "gh", "type": "github", "secret_refs": {"token": "hunter2"}}]}`
	_, err = d.Client.ApplyConfig(ctx, []byte(bad))
	require.ErrorIs(t, err, client.ErrConfigInvalid)
	res, err := d.Client.ValidateConfig(ctx, []byte(bad))
	require.NoError(t, err)
	assert.False(t, res.Valid)
	assert.ElementsMatch(t, []string{
		"$.connections[0].type unknown_connection_type",
		"$.connections[0].secret_refs.token secret_ref",
		"$.scopes[0].routes[0].handler unknown_handler",
		"$.scopes[0].routes[0].binding unknown_binding",
	}, diagnosticKeys(res.Diagnostics), "every static diagnostic, not only the first")
	for _, dg := range res.Diagnostics {
		assert.NotContains(t, dg.Message, "hunter2", "a diagnostic never echoes a secret")
	}

	// Only the package can say the digest is wrong.
	res, err = d.Client.ValidateConfig(ctx, []byte(`{"scopes": [{"id": "home", "entries": [{"id": "inbox", "type": "notes", "config": {"digest": "25:99"}}]}]}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"$.scopes[0].entries[0] invalid_config"}, diagnosticKeys(res.Diagnostics))

	res, err = d.Client.ValidateConfig(ctx, []byte(`{"scopes": [{"id": "home", "colour": "red"}]}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"$.scopes[0].colour unknown_field"}, diagnosticKeys(res.Diagnostics))

	st, err := d.Client.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, gen, st.Generation, "the refused document left generation 1 serving")

	// Restart: the same document is the same generation.
	require.NoError(t, daemontest.WriteConfig(d.ConfigDir, []byte(notesConfig)))
	require.NoError(t, d.Stop())
	d = daemontest.Start(t, daemontest.Options{Binary: bin, ConfigDir: d.ConfigDir, StateDir: d.StateDir})
	st, err = d.Client.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, gen.Number, st.Generation.Number)
	assert.Equal(t, gen.Hash, st.Generation.Hash)

	// SIGHUP with a refused file keeps the generation; with a valid one
	// applies the next.
	require.NoError(t, daemontest.WriteConfig(d.ConfigDir, []byte(bad)))
	require.NoError(t, d.Signal(syscall.SIGHUP))
	require.NoError(t, d.WaitStderr("reload refused"))
	st, err = d.Client.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, gen.Number, st.Generation.Number)

	require.NoError(t, daemontest.WriteConfig(d.ConfigDir, []byte(`{"scopes": [{"id": "home"}, {"id": "work", "disabled": true}]}`)))
	require.NoError(t, d.Signal(syscall.SIGHUP))
	require.NoError(t, d.WaitStderr("msg=reloaded"))
	st, err = d.Client.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, gen.Number+1, st.Generation.Number)
}

// SIGKILL leaves no package process behind: each sees the end of its
// stdin and exits.
func TestServeKilledLeavesNoOrphan(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Packages: []string{notesDir, runnerDir}})
	pids := []int{notesPID(t, d), packagePID(t, d, "runner")}
	fds := make([]int, len(pids))
	for i, pid := range pids {
		fd, err := pidfdOpen(pid)
		require.NoError(t, err, "pid %d", pid)
		t.Cleanup(func() { syscall.Close(fd) })
		fds[i] = fd
	}
	require.NoError(t, d.Kill())
	for i, fd := range fds {
		require.NoError(t, waitPidfd(fd, daemontest.Timeout), "package process %d outlived the killed daemon", pids[i])
	}
}

// SIGTERM shuts down in order (every package gets shutdown and exits) and
// a new daemon on the same directories starts where it stopped.
func TestServeTerminateAndRestart(t *testing.T) {
	ctx := serveContext(t)
	bin := daemonBinary(t)
	d := daemontest.Start(t, daemontest.Options{Binary: bin, Packages: []string{notesDir, runnerDir}, Config: []byte(notesConfig)})
	st, err := d.Client.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Generation.Number)
	pid := notesPID(t, d)
	fd, err := pidfdOpen(pid)
	require.NoError(t, err)
	defer syscall.Close(fd)

	require.NoError(t, d.Stop())
	require.NoError(t, waitPidfd(fd, time.Second), "the package exited before serve did")
	log, err := os.ReadFile(filepath.Join(d.StateDir, "logs", "extensions", "notes.log"))
	require.NoError(t, err)
	assert.Contains(t, string(log), "open-conduit: closed", "closed in order, not killed")
	assert.NotContains(t, string(log), "SIGKILL")

	again := daemontest.Start(t, daemontest.Options{Binary: bin, ConfigDir: d.ConfigDir, StateDir: d.StateDir})
	st2, err := again.Client.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, st.Generation, st2.Generation)
	assert.NotEqual(t, pid, notesPID(t, again))
}

func scopeIDs(ss []client.Scope) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

func diagnosticKeys(ds []client.Diagnostic) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Path+" "+d.Rule)
	}
	return out
}

func notesPID(t *testing.T, d *daemontest.Daemon) int { return packagePID(t, d, "notes") }

var startedPID = regexp.MustCompile(`started \(pid (\d+),`)

// packagePID is the PID of the package's latest start, from its log.
func packagePID(t *testing.T, d *daemontest.Daemon, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.StateDir, "logs", "extensions", name+".log"))
	require.NoError(t, err)
	m := startedPID.FindAllSubmatch(b, -1)
	require.NotEmpty(t, m, "no start in the log of %s", name)
	pid, err := strconv.Atoi(string(m[len(m)-1][1]))
	require.NoError(t, err)
	return pid
}

// pidfdOpen opens a pidfd for a process that is not our child, so its
// exit can be waited for without polling.
func pidfdOpen(pid int) (int, error) {
	const sysPidfdOpen = 434
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// waitPidfd waits until the process behind fd exits (the fd turns
// readable), bounded by d.
func waitPidfd(fd int, d time.Duration) error {
	tv := syscall.NsecToTimeval(d.Nanoseconds())
	for {
		var set syscall.FdSet
		set.Bits[fd/64] |= 1 << (uint(fd) % 64)
		n, err := syscall.Select(fd+1, &set, nil, nil, &tv)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("still running after %v", d)
		}
		return nil
	}
}

// The README's example configuration applies on a daemon with the
// packages the README installs.
func TestServeAppliesTheReadmeExample(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)<!-- config-example -->\\s*```json\\n(.*?)```").FindSubmatch(b)
	require.NotNil(t, m, "README.md has no config example")
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Packages: []string{notesDir, runnerDir}})
	res, err := d.Client.ValidateConfig(serveContext(t), m[1])
	require.NoError(t, err)
	require.True(t, res.Valid, "%+v", res.Diagnostics)
	gen, err := d.Client.ApplyConfig(serveContext(t), m[1])
	require.NoError(t, err)
	assert.Equal(t, int64(1), gen.Number)
}

func TestServeDefaultDirectoriesFollowXDG(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, state, err := defaultDirs(env(map[string]string{"HOME": "/home/u", "XDG_CONFIG_HOME": "/x/config", "XDG_STATE_HOME": "/x/state"}))
	require.NoError(t, err)
	assert.Equal(t, "/x/config/open-conduit", cfg)
	assert.Equal(t, "/x/state/open-conduit", state)
	cfg, state, err = defaultDirs(env(map[string]string{"HOME": "/home/u"}))
	require.NoError(t, err)
	assert.Equal(t, "/home/u/.config/open-conduit", cfg)
	assert.Equal(t, "/home/u/.local/state/open-conduit", state)
	_, _, err = defaultDirs(env(map[string]string{}))
	assert.Error(t, err)
}

func TestServeLogsJSONAndRefusesAnUnknownFormat(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Args: []string{"--log-format", "json"}})
	require.NoError(t, d.Stop())
	lines := 0
	for _, line := range regexp.MustCompile(`\n`).Split(strings.TrimSpace(d.Stderr()), -1) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "%q", line)
		assert.Contains(t, rec, "msg")
		lines++
	}
	assert.NotZero(t, lines)

	var stdout, stderr strings.Builder
	assert.Equal(t, exitUsage, run([]string{"serve", "--log-format", "xml"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "--log-format is text or json")
}

// A package that does not serve validate (offlinecheck answers
// method_not_found) has its objects accepted, as an older SDK's would be.
func TestServeAcceptsObjectsOfAPackageWithoutValidate(t *testing.T) {
	testbin.NeedPython(t)
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Packages: []string{offlinecheckDir}})
	gen, err := d.Client.ApplyConfig(serveContext(t), []byte(`{"scopes": [{"id": "py", "entries": [{"id": "n", "type": "offlinecheck", "config": {"anything": 1}}]}]}`))
	require.NoError(t, err)
	assert.Equal(t, int64(1), gen.Number)
}

func TestServeStopsInOrderOnSIGINT(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Packages: []string{notesDir}})
	require.NoError(t, d.Signal(syscall.SIGINT))
	require.NoError(t, d.Wait(), "SIGINT ends serve with status 0")
	assert.Contains(t, d.Stdout(), "open-conduit serve: stopped")
	log, err := os.ReadFile(filepath.Join(d.StateDir, "logs", "extensions", "notes.log"))
	require.NoError(t, err)
	assert.Contains(t, string(log), "open-conduit: closed")
}
