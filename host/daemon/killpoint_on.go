//go:build faultinject

package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/runtime"
)

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
	fmt.Fprintf(os.Stderr, "open-conduit: kill point %s armed at hit %d\n", arm.name, arm.hit)
	return nil
}

// killPoint kills the process with SIGKILL at the armed hit of name. The
// line on stderr, written before the signal, tells a drill the death was
// the point's.
func killPoint(name string) {
	armed.mu.Lock()
	if !armed.on || armed.arm.name != name {
		armed.mu.Unlock()
		return
	}
	armed.hits++
	if armed.hits < armed.arm.hit {
		armed.mu.Unlock()
		return
	}
	// Held until the signal lands: nothing else passes a point meanwhile.
	fmt.Fprintf(os.Stderr, "open-conduit: kill point %s hit %d: SIGKILL\n", name, armed.hits)
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

// steps are the durable steps one transaction made.
type steps struct{ accept, result, batch, layout, lease bool }

func (st *steps) points(suffix string) []string {
	var out []string
	for _, p := range []struct {
		on   bool
		name string
	}{{st.accept, "event.accept"}, {st.result, "result.commit"}, {st.batch, "kv.batch"}, {st.layout, "kv.layout"}, {st.lease, "lease.write"}} {
		if p.on {
			out = append(out, p.name+suffix)
		}
	}
	return out
}

func (s *killingStore) Transact(ctx context.Context, fn func(runtime.Tx) error) error {
	var st steps
	err := s.Store.Transact(ctx, func(tx runtime.Tx) error {
		if err := fn(&killingTx{Tx: tx, st: &st}); err != nil {
			return err
		}
		for _, p := range st.points(".before") {
			killPoint(p)
		}
		return nil
	})
	if err == nil {
		for _, p := range st.points(".after") {
			killPoint(p)
		}
	}
	return err
}

type killingTx struct {
	runtime.Tx
	st *steps
}

func (t *killingTx) AcceptEvent(env runtime.Envelope) (runtime.Event, bool, error) {
	ev, added, err := t.Tx.AcceptEvent(env)
	t.st.accept = t.st.accept || (err == nil && added)
	return ev, added, err
}

func (t *killingTx) PutToolResult(r runtime.ToolResult) (runtime.ToolResult, bool, error) {
	stored, added, err := t.Tx.PutToolResult(r)
	t.st.result = t.st.result || (err == nil && added)
	return stored, added, err
}

func (t *killingTx) KVCommit(b runtime.KVBatch) error {
	err := t.Tx.KVCommit(b)
	if err == nil {
		layout := false
		for _, p := range b.Puts {
			layout = layout || p.Namespace == host.KVLayoutNamespace
		}
		if layout {
			t.st.layout = true
		} else {
			t.st.batch = true
		}
	}
	return err
}

func (t *killingTx) AcquireLease(req runtime.LeaseRequest) (runtime.Lease, error) {
	l, err := t.Tx.AcquireLease(req)
	t.st.lease = t.st.lease || err == nil
	return l, err
}

func (t *killingTx) RenewLease(name string, epoch int64, now time.Time, ttl time.Duration) (runtime.Lease, error) {
	l, err := t.Tx.RenewLease(name, epoch, now, ttl)
	t.st.lease = t.st.lease || err == nil
	return l, err
}

func (t *killingTx) ReleaseLease(name string, epoch int64) error {
	err := t.Tx.ReleaseLease(name, epoch)
	t.st.lease = t.st.lease || err == nil
	return err
}
