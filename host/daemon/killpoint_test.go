package daemon

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/daemontest"
	"github.com/open-conduit/open-conduit/internal/testbin"
)

// The kill-point tests share one build of open-conduit with the
// faultinject tag.
var (
	faultBinOnce sync.Once
	faultBinDir  string
	faultBinPath string
	faultBinErr  error
)

func faultInjectBinary(tb testing.TB) string {
	tb.Helper()
	faultBinOnce.Do(func() {
		if faultBinDir, faultBinErr = os.MkdirTemp("", "oc-fbin"); faultBinErr == nil {
			faultBinPath, faultBinErr = testbin.BuildTags(faultBinDir, "faultinject")
		}
	})
	if faultBinErr != nil {
		tb.Fatal(faultBinErr)
	}
	testbin.StatInputs(tb, "../..")
	return faultBinPath
}

// killDaemon is a real serve on notes under webhookConfig in dirs that
// outlive it, so a restart finds what the killed daemon kept.
type killDaemon struct {
	bin, cfg, state string
}

func newKillDaemon(t *testing.T, bin string) *killDaemon {
	k := &killDaemon{bin: bin, cfg: daemontest.TempDir(t), state: daemontest.TempDir(t)}
	require.NoError(t, daemontest.Install(k.cfg, "../../extensions/notes"))
	require.NoError(t, daemontest.WriteConfig(k.cfg, []byte(webhookConfig)))
	return k
}

func (k *killDaemon) launch(t *testing.T, env ...string) *daemontest.Daemon {
	t.Helper()
	d, err := daemontest.Launch(t, daemontest.Options{Binary: k.bin, ConfigDir: k.cfg, StateDir: k.state,
		Env: append([]string{"NOTES_WEBHOOK_SECRET=" + webhookSecret}, env...)})
	require.NoError(t, err)
	return d
}

func (k *killDaemon) start(t *testing.T, env ...string) (*daemontest.Daemon, string) {
	t.Helper()
	d := k.launch(t, env...)
	st, err := d.WaitReady(t.Context())
	require.NoError(t, err, "stderr:\n%s", d.Stderr())
	return d, "http://" + st.Paths.Webhook + "/notes/team/inbox"
}

func teamEvents(t *testing.T, d *daemontest.Daemon) []client.Event {
	t.Helper()
	page, err := d.Client.Events(t.Context(), client.EventQuery{Scope: "team"})
	require.NoError(t, err)
	return page.Events
}

// killedBySIGKILL reports whether the daemon's exit was a SIGKILL.
func killedBySIGKILL(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// A kill point armed through OPEN_CONDUIT_KILL_POINT kills the real
// daemon with SIGKILL exactly there, and the restarted daemon keeps what
// was durable: killed before the acceptance commits, nothing (and the
// sender had no 2xx); killed after it but before the 2xx, the Events, which
// the redelivery finds rather than accepting twice; killed after the 2xx,
// everything the sender was told.
func TestKillPointsKillTheDaemonWhereTheyStand(t *testing.T) {
	bin := faultInjectBinary(t)
	cases := []struct {
		point    string
		answered bool // the sender got its 2xx
		kept     int  // Events the restarted daemon has
	}{
		{KillEventAcceptBefore, false, 0},
		{KillIngressAckBefore, false, 2},
		{KillIngressAckAfter, true, 2},
	}
	for _, tc := range cases {
		t.Run(tc.point, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			k := newKillDaemon(t, bin)
			d, url := k.start(t, KillPointEnv+"="+tc.point)
			assert.Contains(t, d.Stderr(), "kill point "+tc.point+" armed at hit 1")
			status, _ := post(t, ctx, url, webhookSecret, signedDelivery)
			assert.Equal(t, tc.answered, status == http.StatusOK, "answered with %d", status)
			err := d.Wait()
			require.True(t, killedBySIGKILL(err), "the daemon died of SIGKILL, not %v\nstderr:\n%s", err, d.Stderr())
			assert.Contains(t, d.Stderr(), "kill point "+tc.point+" hit 1: SIGKILL")

			again, url := k.start(t)
			assert.Len(t, teamEvents(t, again), tc.kept, "what the killed daemon kept")
			status, a := post(t, ctx, url, webhookSecret, signedDelivery)
			require.Equal(t, http.StatusOK, status, "the redelivery is accepted")
			assert.Len(t, a.Events, 2)
			assert.Len(t, teamEvents(t, again), 2, "accepted once, never twice")
			require.NoError(t, again.Stop())
		})
	}
}

// The negative controls: unarmed, the same build passes every point and
// answers; a point it does not know, or the hit count malformed, stops it
// before it opens; a release build (no faultinject tag) with the variable
// set refuses to start rather than run a drill that could never kill.
func TestKillPointControls(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	k := newKillDaemon(t, faultInjectBinary(t))
	d, url := k.start(t)
	status, _ := post(t, ctx, url, webhookSecret, signedDelivery)
	assert.Equal(t, http.StatusOK, status, "no point armed: nothing dies")
	require.NoError(t, d.Stop())

	for env, says := range map[string]string{
		KillPointEnv + "=event.accept.sometime": `no kill point "event.accept.sometime"; the points are event.accept.before,`,
		KillPointEnv + "=event.accept.after:0":  "the hit after the colon is a whole number from 1",
	} {
		d := k.launch(t, env)
		err := d.Wait()
		require.Error(t, err, env)
		assert.False(t, killedBySIGKILL(err))
		assert.Contains(t, d.Stderr(), says, env)
	}

	release := newKillDaemon(t, openConduitBinary(t))
	d = release.launch(t, KillPointEnv+"="+KillEventAcceptAfter)
	err := d.Wait()
	require.Error(t, err)
	assert.Contains(t, d.Stderr(), "built without the faultinject tag")
}

func TestParseKillPoint(t *testing.T) {
	arm, err := parseKillPoint("lease.write.after:3")
	require.NoError(t, err)
	assert.Equal(t, killArm{name: KillLeaseWriteAfter, hit: 3}, arm)
	arm, err = parseKillPoint(KillKVBatchBefore)
	require.NoError(t, err)
	assert.Equal(t, killArm{name: KillKVBatchBefore, hit: 1}, arm)
	arm, err = parseKillPoint("kv.batch.before@notes.index:2")
	require.NoError(t, err)
	assert.Equal(t, killArm{name: KillKVBatchBefore, subject: "notes.index", hit: 2}, arm)
	arm, err = parseKillPoint("result.commit.after@notes.add")
	require.NoError(t, err)
	assert.Equal(t, killArm{name: KillResultCommitAfter, subject: "notes.add", hit: 1}, arm)
	assert.True(t, arm.counts(KillResultCommitAfter, []string{"notes.publish", "notes.add"}))
	assert.False(t, arm.counts(KillResultCommitAfter, []string{"notes.publish"}), "a hit of another subject")
	assert.False(t, arm.counts(KillResultCommitAfter, nil), "a hit with no subject")
	assert.False(t, arm.counts(KillResultCommitBefore, []string{"notes.add"}), "another point")
	for _, bad := range []string{"", "lease.write", "lease.write.after:", "lease.write.after:x", "lease.write.after:01", "lease.write.after:-2",
		"kv.batch.before@", "kv.batch.before@:1", "kv.batch@notes"} {
		_, err := parseKillPoint(bad)
		assert.Error(t, err, "%q", bad)
	}
	names := map[string]bool{}
	for _, p := range KillPoints {
		assert.False(t, names[p.Name], "%s listed twice", p.Name)
		names[p.Name] = true
		assert.NotEmpty(t, p.Doc, p.Name)
	}
	assert.Len(t, names, 12)
}
