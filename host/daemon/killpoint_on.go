//go:build faultinject

package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// reservedNamespace is the prefix of the KV namespaces no extension can
// address (the engine's and the host's own records).
const reservedNamespace = "core"

// FaultInject says whether this build has the kill points (the faultinject
// build tag).
const FaultInject = true

// armed is the kill point this process dies at, read when it opens.
var armed struct {
	mu   sync.Mutex
	arm  killArm
	on   bool
	hits int
}

// armKillPoint reads OPEN_CONDUIT_KILL_POINT from environ.
func armKillPoint(environ []string) error {
	v, ok := lookupEnv(environ, KillPointEnv)
	if !ok || v == "" {
		return nil
	}
	arm, err := parseKillPoint(v)
	if err != nil {
		return err
	}
	armed.mu.Lock()
	defer armed.mu.Unlock()
	armed.arm, armed.on, armed.hits = arm, true, 0
	fmt.Fprintf(os.Stderr, "open-conduit: kill point %s armed at hit %d\n", arm, arm.hit)
	return nil
}

// killPoint kills the process with SIGKILL at the armed hit of name. The
// line on stderr, written before the signal, tells a drill the death was
// the point's.
func killPoint(name string) { killPointOf(name, nil) }

// killPointOf is killPoint for a step that touched subjects (the arm's
// @SUBJECT must be one of them).
func killPointOf(name string, subjects []string) {
	armed.mu.Lock()
	if !armed.on || !armed.arm.counts(name, subjects) {
		armed.mu.Unlock()
		return
	}
	armed.hits++
	if armed.hits < armed.arm.hit {
		armed.mu.Unlock()
		return
	}
	// Held until the signal lands: nothing else passes a point meanwhile.
	fmt.Fprintf(os.Stderr, "open-conduit: kill point %s hit %d: SIGKILL\n", armed.arm, armed.hits)
	killSelf(name)
	armed.mu.Unlock() // only a test's killSelf returns
}

// killSelf ends the process at the point name; a test replaces it to see
// which points a step passes without dying of them.
var killSelf = func(string) {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// killPointFlushed flushes what the handler wrote to its client, then
// passes the point name.
func killPointFlushed(rw http.ResponseWriter, name string) {
	if f, ok := rw.(http.Flusher); ok {
		f.Flush()
	}
	killPoint(name)
}

// killStore decorates the daemon's store with the points of its durable
// steps. runtime stays standard-library only and knows nothing of them.
func killStore(s runtime.Store) runtime.Store { return &killingStore{Store: s} }

type killingStore struct{ runtime.Store }

// steps are the durable steps one transaction made, each with the
// subjects it touched (an arm's @SUBJECT), in the order of a delivery's
// life.
type steps struct {
	order    []string
	subjects map[string][]string
}

// stepOrder is the order a transaction's points are passed in.
var stepOrder = []string{"event.accept", "result.commit", "kv.batch", "kv.layout", "lease.write"}

// made records that the transaction made step, touching subjects.
func (st *steps) made(step string, subjects ...string) {
	if st.subjects == nil {
		st.subjects = map[string][]string{}
	}
	cur, ok := st.subjects[step]
	if !ok {
		st.order = append(st.order, step)
	}
	for _, s := range subjects {
		if !slices.Contains(cur, s) {
			cur = append(cur, s)
		}
	}
	st.subjects[step] = cur
}

// pass passes each step's point with suffix, in stepOrder.
func (st *steps) pass(suffix string) {
	for _, step := range stepOrder {
		if subjects, ok := st.subjects[step]; ok {
			killPointOf(step+suffix, subjects)
		}
	}
}

func (s *killingStore) Transact(ctx context.Context, fn func(runtime.Tx) error) error {
	var st steps
	err := s.Store.Transact(ctx, func(tx runtime.Tx) error {
		st = steps{} // a retried transaction starts over
		if err := fn(&killingTx{Tx: tx, st: &st}); err != nil {
			return err
		}
		st.pass(".before")
		return nil
	})
	if err == nil {
		st.pass(".after")
	}
	return err
}

type killingTx struct {
	runtime.Tx
	st *steps
}

func (t *killingTx) AcceptEvent(env runtime.Envelope) (runtime.Event, bool, error) {
	ev, added, err := t.Tx.AcceptEvent(env)
	if err == nil && added {
		t.st.made("event.accept", ev.Source)
	}
	return ev, added, err
}

func (t *killingTx) PutToolResult(r runtime.ToolResult) (runtime.ToolResult, bool, error) {
	stored, added, err := t.Tx.PutToolResult(r)
	if err == nil && added {
		t.st.made("result.commit", r.Operation)
	}
	return stored, added, err
}

func (t *killingTx) KVCommit(b runtime.KVBatch) error {
	err := t.Tx.KVCommit(b)
	if err != nil {
		return err
	}
	// The host's layout record is kv.layout; an extension's namespaces are
	// kv.batch; the engine's own records (core.*) are neither.
	keys := slices.Clone(b.Deletes)
	for _, p := range b.Puts {
		keys = append(keys, runtime.KVKey{Namespace: p.Namespace, Key: p.Key})
	}
	for _, k := range keys {
		switch {
		case k.Namespace == host.KVLayoutNamespace:
			t.st.made("kv.layout", k.Key)
		case !protocol.Namespace(reservedNamespace, k.Namespace):
			t.st.made("kv.batch", k.Namespace)
		}
	}
	return nil
}

func (t *killingTx) AcquireLease(req runtime.LeaseRequest) (runtime.Lease, error) {
	l, err := t.Tx.AcquireLease(req)
	if err == nil {
		t.st.made("lease.write", req.Name)
	}
	return l, err
}

func (t *killingTx) RenewLease(name string, epoch int64, now time.Time, ttl time.Duration) (runtime.Lease, error) {
	l, err := t.Tx.RenewLease(name, epoch, now, ttl)
	if err == nil {
		t.st.made("lease.write", name)
	}
	return l, err
}

func (t *killingTx) ReleaseLease(name string, epoch int64) error {
	err := t.Tx.ReleaseLease(name, epoch)
	if err == nil {
		t.st.made("lease.write", name)
	}
	return err
}
