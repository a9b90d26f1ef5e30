// Package sdktest is a fake host for testing extensions written with
// package sdk: an in-memory implementation of the host services an
// extension calls (KV with preconditions and emissions, artifacts,
// timers, wait progress, secrets), reachable in process as an sdk.Caller
// and over the wire as a jsonrpc.Handler, plus Pipe, which serves an
// extension over a pair of pipes the way the host runs a process.
//
// It is deliberately small: state reads answer not_found or empty pages,
// and methods it does not know answer method_not_found. Set Override to
// answer a method yourself.
package sdktest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// Host is an in-memory fake of the host services. The zero value is not
// ready; use New. It is safe for concurrent use.
type Host struct {
	// Override, when set, is asked first about every call: handled false
	// passes the call on to the fake.
	Override func(ctx context.Context, method string, params any) (result any, handled bool, err error)

	mu        sync.Mutex
	kv        map[protocol.KVKey]json.RawMessage
	events    map[string]protocol.Event
	seq       int64
	artifacts map[string]*Artifact
	nextID    int
	calls     []string
	progress  map[string]string
	timers    map[string]protocol.Timer
	secrets   map[string]map[string]string
}

// Artifact is an artifact as the fake host received it.
type Artifact struct {
	Params    protocol.ArtifactCreateParams
	Chunks    [][]byte
	Committed bool
	Aborted   bool
}

// New returns an empty fake host.
func New() *Host {
	return &Host{
		kv:        map[protocol.KVKey]json.RawMessage{},
		events:    map[string]protocol.Event{},
		artifacts: map[string]*Artifact{},
		progress:  map[string]string{},
		timers:    map[string]protocol.Timer{},
		secrets:   map[string]map[string]string{},
	}
}

var _ sdk.Caller = (*Host)(nil)

// Version is the fake's KV version of a value: a digest.
func Version(value json.RawMessage) string {
	sum := sha256.Sum256(value)
	return hex.EncodeToString(sum[:8])
}

// Calls lists the methods called so far, in order.
func (h *Host) Calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// KV returns the stored value of a key, nil when absent.
func (h *Host) KV(namespace, key string) json.RawMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.kv[protocol.KVKey{Namespace: namespace, Key: key}]
}

// SetKV stores a value directly, as another writer would.
func (h *Host) SetKV(namespace, key string, value json.RawMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kv[protocol.KVKey{Namespace: namespace, Key: key}] = value
}

// Events returns the accepted Events by sequence.
func (h *Host) Events() []protocol.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]protocol.Event, 0, len(h.events))
	for _, e := range h.events {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sequence < out[j].Sequence })
	return out
}

// AddEvent stores an accepted Event, as an earlier release or another
// source would have; its sequence is assigned.
func (h *Host) AddEvent(ev protocol.Event) protocol.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	ev.Sequence = h.seq
	h.events[ev.ID] = ev
	return ev
}

// Artifact returns the artifact with id, or nil.
func (h *Host) Artifact(id string) *Artifact {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.artifacts[id]
}

// Progress returns the progress line set for a Work's Wait.
func (h *Host) Progress(workID string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.progress[workID]
}

// SetSecrets gives a connection's secrets to secret.resolve.
func (h *Host) SetSecrets(connection string, values map[string]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.secrets[connection] = values
}

// Handler serves the fake over a jsonrpc connection.
func (h *Host) Handler() jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		var out json.RawMessage
		if err := h.Call(ctx, req.Method, json.RawMessage(req.Params), &out); err != nil {
			return nil, err
		}
		return out, nil
	})
}

// Call serves one extension-to-host call, in either form sdk.Caller allows.
func (h *Host) Call(ctx context.Context, method string, params, result any) error {
	if h.Override != nil {
		res, handled, err := h.Override(ctx, method, params)
		if handled {
			if err != nil {
				return err
			}
			return protocol.SetResult(result, res)
		}
	}
	h.mu.Lock()
	h.calls = append(h.calls, method)
	h.mu.Unlock()
	res, err := h.serve(method, params)
	if err != nil {
		return err
	}
	return protocol.SetResult(result, res)
}

func (h *Host) serve(method string, params any) (any, error) {
	switch method {
	case "kv.get":
		return call(params, h.kvGet)
	case "kv.list":
		return call(params, h.kvList)
	case "kv.commit":
		return call(params, h.kvCommit)
	case "artifact.create":
		return call(params, h.artifactCreate)
	case "artifact.write":
		return call(params, h.artifactWrite)
	case "artifact.commit":
		return call(params, h.artifactCommit)
	case "artifact.abort":
		return call(params, h.artifactAbort)
	case "wait.progress":
		return call(params, func(p protocol.WaitProgressParams) (protocol.WaitProgressResult, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.progress[p.WorkID] = p.Progress
			return protocol.WaitProgressResult{}, nil
		})
	case "timer.arm":
		return call(params, func(p protocol.TimerArmParams) (protocol.TimerArmResult, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			t := protocol.Timer{Key: p.Key, ScopeID: p.ScopeID, WorkID: p.WorkID, Kind: p.Recurrence, Due: p.Due, Recurrence: p.Recurrence, Payload: p.Payload}
			h.timers[p.Key] = t
			return protocol.TimerArmResult{Timer: t}, nil
		})
	case "timer.cancel":
		return call(params, func(p protocol.TimerCancelParams) (protocol.TimerCancelResult, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			_, ok := h.timers[p.Key]
			delete(h.timers, p.Key)
			return protocol.TimerCancelResult{Cancelled: ok}, nil
		})
	case "secret.resolve":
		return call(params, func(p protocol.SecretResolveParams) (protocol.SecretResolveResult, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			vals, ok := h.secrets[p.Connection]
			if !ok {
				return protocol.SecretResolveResult{}, protocol.Errorf(protocol.CodeUnauthorized, "connection %q is not bound", p.Connection)
			}
			out := map[string]string{}
			for k, v := range vals {
				if len(p.Names) == 0 || slices.Contains(p.Names, k) {
					out[k] = v
				}
			}
			return protocol.SecretResolveResult{Values: out}, nil
		})
	case "state.event":
		return call(params, func(p protocol.IDParams) (protocol.EventResult, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			ev, ok := h.events[p.ID]
			if !ok {
				return protocol.EventResult{}, protocol.Errorf(protocol.CodeNotFound, "no event %q", p.ID)
			}
			return protocol.EventResult{Event: ev}, nil
		})
	case "state.work", "state.scope":
		return nil, protocol.Errorf(protocol.CodeNotFound, "not found")
	case "state.sequence":
		h.mu.Lock()
		defer h.mu.Unlock()
		return protocol.SequenceResult{Sequence: h.seq}, nil
	}
	return nil, protocol.Errorf(protocol.CodeMethodNotFound, "the fake host does not serve %s", method)
}

func call[P, R any](params any, f func(P) (R, error)) (any, error) {
	p, err := protocol.DecodeParams[P](params)
	if err != nil {
		return nil, err
	}
	return f(p)
}

func (h *Host) kvGet(p protocol.KVGetParams) (protocol.KVGetResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.kv[protocol.KVKey(p)]
	if !ok {
		return protocol.KVGetResult{}, nil
	}
	return protocol.KVGetResult{Found: true, Value: v, Version: Version(v)}, nil
}

func (h *Host) kvList(p protocol.KVListParams) (protocol.KVListResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var keys []string
	for k := range h.kv {
		if k.Namespace == p.Namespace && strings.HasPrefix(k.Key, p.Prefix) && k.Key > p.After {
			keys = append(keys, k.Key)
		}
	}
	sort.Strings(keys)
	limit := p.Limit
	if limit <= 0 || limit > protocol.MaxPageLimit {
		limit = protocol.MaxPageLimit
	}
	r := protocol.KVListResult{Items: []protocol.KVItem{}}
	for i, k := range keys {
		if i == limit {
			r.Next = keys[i-1]
			break
		}
		v := h.kv[protocol.KVKey{Namespace: p.Namespace, Key: k}]
		r.Items = append(r.Items, protocol.KVItem{Key: k, Value: v, Version: Version(v)})
	}
	return r, nil
}

func (h *Host) kvCommit(p protocol.KVCommitParams) (protocol.KVCommitResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, pre := range p.Preconditions {
		v, ok := h.kv[protocol.KVKey{Namespace: pre.Namespace, Key: pre.Key}]
		switch {
		case pre.Absent && ok:
			return protocol.KVCommitResult{}, protocol.Errorf(protocol.CodeConflict, "%s/%s exists", pre.Namespace, pre.Key)
		case !pre.Absent && (!ok || Version(v) != pre.Version):
			return protocol.KVCommitResult{}, protocol.Errorf(protocol.CodeConflict, "%s/%s changed", pre.Namespace, pre.Key)
		}
	}
	var r protocol.KVCommitResult
	for _, e := range p.Emissions {
		id := protocol.EmittedEventID(e.Source, e.DeliveryID)
		if old, ok := h.events[id]; ok {
			r.Accepted = append(r.Accepted, protocol.EmissionOutcome{Event: &old})
			continue
		}
		h.seq++
		ev := protocol.Event{ID: id, Sequence: h.seq, ScopeID: e.ScopeID, Source: e.Source, DeliveryID: e.DeliveryID,
			Family: e.Family, Type: e.Type, Schema: e.Schema, Payload: e.Payload, Parent: e.Parent, Root: id,
			Works: e.Works, OccurredAt: e.OccurredAt, AcceptedAt: time.Unix(0, 0).UTC()}
		if e.Parent != "" {
			parent := h.events[e.Parent]
			ev.Root, ev.Depth = parent.Root, parent.Depth+1
		}
		h.events[id] = ev
		r.Accepted = append(r.Accepted, protocol.EmissionOutcome{Event: &ev, Added: true})
	}
	for _, put := range p.Puts {
		h.kv[protocol.KVKey{Namespace: put.Namespace, Key: put.Key}] = put.Value
	}
	for _, d := range p.Deletes {
		delete(h.kv, d)
	}
	return r, nil
}

func (h *Host) artifactCreate(p protocol.ArtifactCreateParams) (protocol.ArtifactCreateResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextID++
	id := fmt.Sprintf("art-%d", h.nextID)
	h.artifacts[id] = &Artifact{Params: p}
	return protocol.ArtifactCreateResult{ArtifactID: id}, nil
}

func (h *Host) artifact(id string) (*Artifact, int64, error) {
	a, ok := h.artifacts[id]
	if !ok || a.Committed || a.Aborted {
		return nil, 0, protocol.Errorf(protocol.CodeNotFound, "no open artifact %q", id)
	}
	var size int64
	for _, c := range a.Chunks {
		size += int64(len(c))
	}
	return a, size, nil
}

func (h *Host) artifactWrite(p protocol.ArtifactWriteParams) (protocol.ArtifactWriteResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, size, err := h.artifact(p.ArtifactID)
	if err != nil {
		return protocol.ArtifactWriteResult{}, err
	}
	switch {
	case len(p.Data) > protocol.MaxChunkBytes:
		return protocol.ArtifactWriteResult{}, protocol.Errorf(protocol.CodeInvalid, "chunk of %d bytes is over %d", len(p.Data), protocol.MaxChunkBytes)
	case p.Offset+int64(len(p.Data)) <= size:
		return protocol.ArtifactWriteResult{Size: size}, nil // a chunk sent again
	case p.Offset != size:
		return protocol.ArtifactWriteResult{}, protocol.Errorf(protocol.CodeConflict, "chunk at %d, artifact has %d bytes", p.Offset, size)
	}
	a.Chunks = append(a.Chunks, slices.Clone(p.Data))
	return protocol.ArtifactWriteResult{Size: size + int64(len(p.Data))}, nil
}

func (h *Host) artifactCommit(p protocol.ArtifactCommitParams) (protocol.ArtifactCommitResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, size, err := h.artifact(p.ArtifactID)
	if err != nil {
		return protocol.ArtifactCommitResult{}, err
	}
	if p.Size != size {
		return protocol.ArtifactCommitResult{}, protocol.Errorf(protocol.CodeConflict, "commit of %d bytes, artifact has %d", p.Size, size)
	}
	a.Committed = true
	sum := sha256.New()
	for _, c := range a.Chunks {
		sum.Write(c)
	}
	return protocol.ArtifactCommitResult{ArtifactID: p.ArtifactID, Size: size, SHA256: hex.EncodeToString(sum.Sum(nil))}, nil
}

func (h *Host) artifactAbort(p protocol.ArtifactAbortParams) (protocol.ArtifactAbortResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, _, err := h.artifact(p.ArtifactID)
	if err != nil {
		return protocol.ArtifactAbortResult{}, err
	}
	a.Aborted = true
	return protocol.ArtifactAbortResult{}, nil
}

// Pipe serves ext with sdk.ServeConn over a pair of OS pipes, as the host
// runs an extension process, and returns the host's end: a connection
// whose incoming calls h serves. done receives ServeConn's result. Close
// the connection (end of input for the extension) to stop it.
func Pipe(ctx context.Context, ext *sdk.Extension, h *Host) (conn *jsonrpc.Conn, done <-chan error, err error) {
	toExtR, toExtW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	fromExtR, fromExtW, err := os.Pipe()
	if err != nil {
		toExtR.Close()
		toExtW.Close()
		return nil, nil, err
	}
	ch := make(chan error, 1)
	go func() { ch <- sdk.ServeConn(ctx, toExtR, fromExtW, ext) }()
	var handler jsonrpc.Handler
	if h != nil {
		handler = h.Handler()
	}
	conn = jsonrpc.NewConn(fromExtR, toExtW, handler, &jsonrpc.Options{DecodeError: sdk.DecodeError})
	return conn, ch, nil
}

// Process is an extension started by Start: a child process reached over
// its stdin and stdout, as the host reaches one.
type Process struct {
	// Conn speaks the protocol with the child; closing it is end of input.
	Conn *jsonrpc.Conn
	// Cmd is the started command.
	Cmd *exec.Cmd
	// Done is closed once the child has exited; Err then says how.
	Done <-chan struct{}

	stderr lockedBuffer
	err    error
}

// Start starts cmd (prepared by the caller: path, args, environment,
// process attributes) with the protocol on its stdin and stdout, served on
// this side by h (nil answers method_not_found), and its stderr collected.
func Start(cmd *exec.Cmd, h *Host) (*Process, error) {
	toChildR, toChildW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	fromChildR, fromChildW, err := os.Pipe()
	if err != nil {
		toChildR.Close()
		toChildW.Close()
		return nil, err
	}
	done := make(chan struct{})
	p := &Process{Cmd: cmd, Done: done}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = toChildR, fromChildW, &p.stderr
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{toChildR, toChildW, fromChildR, fromChildW} {
			f.Close()
		}
		return nil, err
	}
	toChildR.Close()
	fromChildW.Close()
	go func() {
		p.err = cmd.Wait()
		close(done)
	}()
	var handler jsonrpc.Handler
	if h != nil {
		handler = h.Handler()
	}
	p.Conn = jsonrpc.NewConn(fromChildR, toChildW, handler, &jsonrpc.Options{DecodeError: sdk.DecodeError})
	return p, nil
}

// Err is how the child exited; it is valid once Done is closed.
func (p *Process) Err() error {
	<-p.Done
	return p.err
}

// Stderr is what the child has written to its stderr so far.
func (p *Process) Stderr() string { return p.stderr.String() }

// lockedBuffer collects a child's stderr while tests read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
