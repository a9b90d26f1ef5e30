package daemon

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Kill points: places just before and just after the daemon's durable
// steps where a build with the faultinject tag can SIGKILL itself, so a
// drill kills the daemon exactly where a power loss hurts most. Which point
// (and at which hit) is read once, when the daemon opens, from
// OPEN_CONDUIT_KILL_POINT=NAME[@SUBJECT][:N] (N defaults to 1). A build without the
// tag compiles every point to nothing (killpoint_off.go) and refuses to
// open with the variable set, so a drill cannot pass on a binary that
// would never kill.
//
// A point is hit once per transaction that makes its step, however many
// records the transaction writes: ".before" once the transaction has
// written everything and before it commits (killed there, nothing of it is
// kept), ".after" once the commit returned (kept, but nobody was told).
//
// A SUBJECT counts only the hits whose step touched it, so a drill names
// the one step it means among the many a daemon makes: for kv.batch a KV
// namespace the batch writes (an extension's, never the engine's own
// core.*), for kv.layout the package whose layout is recorded, for
// result.commit the operation, for lease.write the lease, for
// event.accept the Event's source. The webhook's ingress.ack points have
// no subject. A SUBJECT holds no colon.

// KillPointEnv names the kill point a faultinject build arms.
const KillPointEnv = "OPEN_CONDUIT_KILL_POINT"

// KillPoint is one named point.
type KillPoint struct {
	Name string
	// Doc says where it stands, for drills and docs.
	Doc string
}

// The point names the daemon's code hits.
const (
	KillEventAcceptBefore  = "event.accept.before"
	KillEventAcceptAfter   = "event.accept.after"
	KillIngressAckBefore   = "ingress.ack.before"
	KillIngressAckAfter    = "ingress.ack.after"
	KillResultCommitBefore = "result.commit.before"
	KillResultCommitAfter  = "result.commit.after"
	KillKVBatchBefore      = "kv.batch.before"
	KillKVBatchAfter       = "kv.batch.after"
	KillKVLayoutBefore     = "kv.layout.before"
	KillKVLayoutAfter      = "kv.layout.after"
	KillLeaseWriteBefore   = "lease.write.before"
	KillLeaseWriteAfter    = "lease.write.after"
)

// KillPoints lists every kill point, in the order of a delivery's life.
var KillPoints = []KillPoint{
	{KillEventAcceptBefore, "a transaction accepting a new Event has written it and not committed"},
	{KillEventAcceptAfter, "a new Event's acceptance has committed; no sender or extension has been told"},
	{KillIngressAckBefore, "a webhook's Events are durable; its 2xx is not written"},
	{KillIngressAckAfter, "a webhook's 2xx has been written and flushed to the sender"},
	{KillResultCommitBefore, "an operation's result under its request ID is written, not committed"},
	{KillResultCommitAfter, "an operation's result has committed; its caller has not been answered"},
	{KillKVBatchBefore, "an extension's KV batch (a kv.commit, a step of a KV migration) is written, not committed"},
	{KillKVBatchAfter, "an extension's KV batch has committed; the extension has not been answered"},
	{KillKVLayoutBefore, "the host's record of a package's new KV layout (a migration's end) is written, not committed"},
	{KillKVLayoutAfter, "the new KV layout has committed; the package's configure is not done"},
	{KillLeaseWriteBefore, "a lease acquire, renewal or release is written, not committed"},
	{KillLeaseWriteAfter, "a lease write has committed"},
}

// killArm is a parsed OPEN_CONDUIT_KILL_POINT.
type killArm struct {
	name    string
	subject string // empty: every hit of the point counts
	hit     int
}

// String is the point as NAME[@SUBJECT].
func (a killArm) String() string {
	if a.subject == "" {
		return a.name
	}
	return a.name + "@" + a.subject
}

// counts reports whether a hit of point name, whose step touched
// subjects, is one the arm counts.
func (a killArm) counts(name string, subjects []string) bool {
	return a.name == name && (a.subject == "" || slices.Contains(subjects, a.subject))
}

// parseKillPoint reads NAME[@SUBJECT][:N].
func parseKillPoint(v string) (killArm, error) {
	point, n, hasN := strings.Cut(v, ":")
	name, subject, hasSubject := strings.Cut(point, "@")
	if hasSubject && subject == "" {
		return killArm{}, fmt.Errorf("daemon: %s=%q: the subject after the @ is empty", KillPointEnv, v)
	}
	arm := killArm{name: name, subject: subject, hit: 1}
	known := false
	names := make([]string, len(KillPoints))
	for i, p := range KillPoints {
		names[i] = p.Name
		known = known || p.Name == name
	}
	if !known {
		return arm, fmt.Errorf("daemon: %s=%q: no kill point %q; the points are %s", KillPointEnv, v, name, strings.Join(names, ", "))
	}
	if hasN {
		hit, err := strconv.Atoi(n)
		if err != nil || hit < 1 || strconv.Itoa(hit) != n {
			return arm, fmt.Errorf("daemon: %s=%q: the hit after the colon is a whole number from 1", KillPointEnv, v)
		}
		arm.hit = hit
	}
	return arm, nil
}

// lookupEnv is the value of name in environ.
func lookupEnv(environ []string, name string) (string, bool) {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}
