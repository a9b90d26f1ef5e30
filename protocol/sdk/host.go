package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// Caller makes one call of the protocol: method is a catalogue name,
// params a wire params value, result a pointer to the wire result (nil for
// none). A *jsonrpc.Conn is a Caller over the wire (params and result
// travel as JSON); in process, params is a value of the method's wire
// params type and result a pointer to its result type, which the callee
// fills. Errors are *protocol.Error values either way, so errors.Is
// matches the protocol's sentinels.
type Caller interface {
	Call(ctx context.Context, method string, params, result any) error
}

// CallerFunc adapts a function to Caller.
type CallerFunc func(ctx context.Context, method string, params, result any) error

// Call calls f.
func (f CallerFunc) Call(ctx context.Context, method string, params, result any) error {
	return f(ctx, method, params, result)
}

var _ Caller = CallerFunc(nil)

// DecodeError turns a JSON-RPC error response into the *protocol.Error it
// carries, so errors.Is(err, protocol.ErrConflict) holds for a conflict
// answered over the wire. Set it as jsonrpc.Options.DecodeError on a
// connection that speaks the protocol.
func DecodeError(code int, message string, data json.RawMessage) error {
	return protocol.DecodeWireError(code, message, data)
}

// Host is an extension's client of the host services, over a Caller. The
// host binds every call to the identity it started the extension with, so
// nothing here names the extension; the manifest only lets the client
// check writes before they cross. A Host is safe for concurrent use.
type Host struct {
	c      Caller
	m      *protocol.Manifest
	upcast func(*protocol.Event) (bool, string, error) // set when serving
	// rpc, set when serving over a stream, is the transport c calls
	// through (ArtifactWriter sends a chunk ahead of its answer on it).
	rpc func() *jsonrpc.Conn
}

// NewHost returns a Host calling c on behalf of the extension m describes
// (m may be nil; then Once and the early write checks are unavailable).
func NewHost(c Caller, m *protocol.Manifest) *Host { return &Host{c: c, m: m} }

// Call makes any call of the protocol through the Host's Caller, for a
// method without a helper of its own.
func (h *Host) Call(ctx context.Context, method string, params, result any) error {
	return h.c.Call(ctx, method, params, result)
}

// Manifest returns the manifest the Host was made with, or nil.
func (h *Host) Manifest() *protocol.Manifest { return h.m }

// Upcast prepares an Event read from the host (Event, Events, WorkEvents)
// the way decision handlers receive theirs: an older payload of one of
// the extension's own schemas is converted to the current version in
// place, and ok is false for one this release cannot read (retired,
// newer or undeclared), whose payload the caller must not decide on. A
// Host made with NewHost rather than given by Serve or Attach has no
// upcasters and only reports whether the payload is current or foreign.
func (h *Host) Upcast(ev *protocol.Event) (ok bool, err error) {
	if h.upcast != nil {
		ok, _, err = h.upcast(ev)
		return ok, err
	}
	s := h.m.PayloadStatus(ev.Schema)
	return s == protocol.Current || s == protocol.Foreign, nil
}

// ---- KV ----

// Get reads one KV entry; found is false when it is absent.
func (h *Host) Get(ctx context.Context, namespace, key string) (protocol.KVGetResult, error) {
	var r protocol.KVGetResult
	err := h.c.Call(ctx, "kv.get", protocol.KVGetParams{Namespace: namespace, Key: key}, &r)
	return r, err
}

// List reads one page of a namespace's entries.
func (h *Host) List(ctx context.Context, p protocol.KVListParams) (protocol.KVListResult, error) {
	var r protocol.KVListResult
	err := h.c.Call(ctx, "kv.list", p, &r)
	return r, err
}

// Commit applies one atomic batch. A failed precondition is
// protocol.ErrConflict: re-read and retry, as Update does.
func (h *Host) Commit(ctx context.Context, p protocol.KVCommitParams) (protocol.KVCommitResult, error) {
	for _, e := range p.Emissions {
		if err := h.checkWrite(e.Schema); err != nil {
			return protocol.KVCommitResult{}, err
		}
	}
	var r protocol.KVCommitResult
	err := h.c.Call(ctx, "kv.commit", p, &r)
	return r, err
}

// MaxUpdateAttempts is how many times Update runs its function before it
// gives up on conflicts.
const MaxUpdateAttempts = 8

// Update runs fn on a fresh Txn and commits what it wrote, guarded by
// everything it read: each entry read must still be at the version read
// (or still absent). When another writer got there first the commit is a
// conflict, and Update runs fn again on fresh reads, at most
// MaxUpdateAttempts times; the last conflict is returned wrapped. An
// error from fn is returned as it is, and nothing is committed; so is
// nothing when fn wrote nothing. fn may run more than once, so it must
// have no effect beyond the Txn.
func (h *Host) Update(ctx context.Context, fn func(*Txn) error) (protocol.KVCommitResult, error) {
	var err error
	for range MaxUpdateAttempts {
		t := &Txn{ctx: ctx, h: h, reads: map[protocol.KVKey]protocol.KVPrecondition{}, values: map[protocol.KVKey]json.RawMessage{}}
		if err = fn(t); err != nil {
			return protocol.KVCommitResult{}, err
		}
		if len(t.puts) == 0 && len(t.deletes) == 0 && len(t.emissions) == 0 {
			return protocol.KVCommitResult{}, nil
		}
		var r protocol.KVCommitResult
		r, err = h.Commit(ctx, t.batch())
		if err == nil || !errors.Is(err, protocol.ErrConflict) {
			return r, err
		}
	}
	return protocol.KVCommitResult{}, fmt.Errorf("sdk: update conflicted %d times: %w", MaxUpdateAttempts, err)
}

func (h *Host) checkWrite(schema string) error {
	if h.m == nil {
		return nil
	}
	return h.m.CheckWrite(schema)
}

// Txn gathers one Update's reads and writes. Its reads go to the host at
// once; its writes and emissions are sent together when fn returns.
type Txn struct {
	ctx       context.Context
	h         *Host
	reads     map[protocol.KVKey]protocol.KVPrecondition
	values    map[protocol.KVKey]json.RawMessage
	order     []protocol.KVKey
	puts      []protocol.KVPut
	deletes   []protocol.KVKey
	emissions []protocol.Emission
}

// Get reads an entry and makes the commit depend on it staying as read.
// Within one Txn reads repeat: an entry read before reads the same again,
// and one written or deleted in the Txn reads as written.
func (t *Txn) Get(namespace, key string) (value json.RawMessage, found bool, err error) {
	for _, p := range t.puts {
		if p.Namespace == namespace && p.Key == key {
			return p.Value, true, nil
		}
	}
	k := protocol.KVKey{Namespace: namespace, Key: key}
	for _, d := range t.deletes {
		if d == k {
			return nil, false, nil
		}
	}
	if pre, seen := t.reads[k]; seen {
		v := t.values[k]
		return v, !pre.Absent, nil
	}
	r, err := t.h.Get(t.ctx, namespace, key)
	if err != nil {
		return nil, false, err
	}
	t.order = append(t.order, k)
	pre := protocol.KVPrecondition{Namespace: namespace, Key: key, Absent: true}
	if r.Found {
		pre = protocol.KVPrecondition{Namespace: namespace, Key: key, Version: r.Version}
	}
	t.reads[k] = pre
	t.values[k] = r.Value
	return r.Value, r.Found, nil
}

// GetJSON reads an entry into v, as Get does.
func (t *Txn) GetJSON(namespace, key string, v any) (found bool, err error) {
	raw, found, err := t.Get(namespace, key)
	if err != nil || !found {
		return found, err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("sdk: kv %s/%s: %w", namespace, key, err)
	}
	return true, nil
}

// Put writes v (a json.RawMessage as it is, anything else marshalled).
func (t *Txn) Put(namespace, key string, v any) error {
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return fmt.Errorf("sdk: kv %s/%s: %w", namespace, key, err)
		}
	}
	t.drop(namespace, key)
	t.puts = append(t.puts, protocol.KVPut{Namespace: namespace, Key: key, Value: raw})
	return nil
}

// Delete deletes an entry.
func (t *Txn) Delete(namespace, key string) {
	t.drop(namespace, key)
	t.deletes = append(t.deletes, protocol.KVKey{Namespace: namespace, Key: key})
}

// drop forgets an earlier write of the key: a key appears in at most one
// write of a batch, the last one.
func (t *Txn) drop(namespace, key string) {
	k := protocol.KVKey{Namespace: namespace, Key: key}
	for i, p := range t.puts {
		if p.Namespace == namespace && p.Key == key {
			t.puts = append(t.puts[:i], t.puts[i+1:]...)
			break
		}
	}
	for i, d := range t.deletes {
		if d == k {
			t.deletes = append(t.deletes[:i], t.deletes[i+1:]...)
			break
		}
	}
}

// Emit adds an Event for the host to accept with the batch's writes, in
// the same transaction, and returns the id the Event will have
// (protocol.EmittedEventID), so the batch's own records can name it.
func (t *Txn) Emit(e protocol.Emission) string {
	t.emissions = append(t.emissions, e)
	return protocol.EmittedEventID(e.Source, e.DeliveryID)
}

func (t *Txn) batch() protocol.KVCommitParams {
	p := protocol.KVCommitParams{Puts: t.puts, Deletes: t.deletes, Emissions: t.emissions}
	for _, k := range t.order {
		p.Preconditions = append(p.Preconditions, t.reads[k])
	}
	return p
}

// ---- State reads ----

// Work reads one Work in the extension's scopes or of its kinds.
func (h *Host) Work(ctx context.Context, id string) (protocol.Work, error) {
	var r protocol.WorkResult
	err := h.c.Call(ctx, "state.work", protocol.IDParams{ID: id}, &r)
	return r.Work, err
}

// Works reads one page of Work.
func (h *Host) Works(ctx context.Context, p protocol.WorksParams) (protocol.WorksResult, error) {
	var r protocol.WorksResult
	err := h.c.Call(ctx, "state.works", p, &r)
	return r, err
}

// Event reads one Event. Its payload is as stored: see Readable.
func (h *Host) Event(ctx context.Context, id string) (protocol.Event, error) {
	var r protocol.EventResult
	err := h.c.Call(ctx, "state.event", protocol.IDParams{ID: id}, &r)
	return r.Event, err
}

// Events reads one page of the extension's scopes' Events.
func (h *Host) Events(ctx context.Context, p protocol.EventsParams) ([]protocol.Event, error) {
	var r protocol.EventsResult
	err := h.c.Call(ctx, "state.events", p, &r)
	return r.Events, err
}

// WorkEvents reads one page of a Work's Events.
func (h *Host) WorkEvents(ctx context.Context, p protocol.WorkEventsParams) ([]protocol.Event, error) {
	var r protocol.EventsResult
	err := h.c.Call(ctx, "state.work_events", p, &r)
	return r.Events, err
}

// Scopes lists the scopes whose configuration uses the extension.
func (h *Host) Scopes(ctx context.Context) ([]protocol.Scope, error) {
	var r protocol.ScopesResult
	err := h.c.Call(ctx, "state.scopes", protocol.Empty{}, &r)
	return r.Scopes, err
}

// Sequence reads the latest accepted Event's sequence.
func (h *Host) Sequence(ctx context.Context) (int64, error) {
	var r protocol.SequenceResult
	err := h.c.Call(ctx, "state.sequence", protocol.Empty{}, &r)
	return r.Sequence, err
}

// Waits lists a Work's Waits, oldest first.
func (h *Host) Waits(ctx context.Context, workID string) ([]protocol.Wait, error) {
	var r protocol.WaitsResult
	err := h.c.Call(ctx, "state.waits", protocol.WorkIDParams{WorkID: workID}, &r)
	return r.Waits, err
}

// Timers lists the extension's armed timers, earliest due first.
func (h *Host) Timers(ctx context.Context, p protocol.TimersParams) ([]protocol.Timer, error) {
	var r protocol.TimersResult
	err := h.c.Call(ctx, "state.timers", p, &r)
	return r.Timers, err
}

// ---- Events, timers, Work ----

// EventAccept derives an Event from a parent, with KV records that commit
// with it.
func (h *Host) EventAccept(ctx context.Context, p protocol.EventAcceptParams) (protocol.EventAcceptResult, error) {
	if err := h.checkWrite(p.Schema); err != nil {
		return protocol.EventAcceptResult{}, err
	}
	var r protocol.EventAcceptResult
	err := h.c.Call(ctx, "event.accept", p, &r)
	return r, err
}

// TimerArm arms a timer of a declared recurrence.
func (h *Host) TimerArm(ctx context.Context, p protocol.TimerArmParams) (protocol.Timer, error) {
	if err := h.checkWrite(p.Schema); err != nil {
		return protocol.Timer{}, err
	}
	var r protocol.TimerArmResult
	err := h.c.Call(ctx, "timer.arm", p, &r)
	return r.Timer, err
}

// TimerCancel cancels a timer; cancelled is false when none was armed.
func (h *Host) TimerCancel(ctx context.Context, key string) (cancelled bool, err error) {
	var r protocol.TimerCancelResult
	err = h.c.Call(ctx, "timer.cancel", protocol.TimerCancelParams{Key: key}, &r)
	return r.Cancelled, err
}

// WorkCancel cancels Work of the extension's own kinds.
func (h *Host) WorkCancel(ctx context.Context, workID, reason string) (cancelled bool, err error) {
	var r protocol.WorkCancelResult
	err = h.c.Call(ctx, "work.cancel", protocol.WorkCancelParams{WorkID: workID, Reason: reason}, &r)
	return r.Cancelled, err
}

// WaitProgress sets the progress line of a Work's active Wait, which one of
// the extension's wait operations declared; "" clears it.
func (h *Host) WaitProgress(ctx context.Context, workID, progress string) error {
	return h.c.Call(ctx, "wait.progress", protocol.WaitProgressParams{WorkID: workID, Progress: progress}, nil)
}

// IngressDeliver delivers Events from the extension's own receiver and
// returns after the host accepted them durably: acknowledge upstream only
// then.
func (h *Host) IngressDeliver(ctx context.Context, p protocol.IngressDeliverParams) (protocol.IngressDeliverResult, error) {
	for _, e := range p.Events {
		if err := h.checkWrite(e.Schema); err != nil {
			return protocol.IngressDeliverResult{}, err
		}
	}
	var r protocol.IngressDeliverResult
	err := h.c.Call(ctx, "ingress.deliver", p, &r)
	return r, err
}

// SecretResolve resolves a connection's secrets. Never log the values.
func (h *Host) SecretResolve(ctx context.Context, p protocol.SecretResolveParams) (map[string]string, error) {
	var r protocol.SecretResolveResult
	err := h.c.Call(ctx, "secret.resolve", p, &r)
	return r.Values, err
}

// PersistRecovery persists a run's recovery metadata through the host's
// lease-fenced path; executor.recover receives it after a restart.
func (h *Host) PersistRecovery(ctx context.Context, runID string, recovery json.RawMessage) error {
	return h.c.Call(ctx, "execution.persist_recovery",
		protocol.ExecutionPersistRecoveryParams{RunID: runID, Recovery: recovery}, nil)
}
