package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// ---- timers ----

func (s *Service) declaredRecurrence(name string) bool {
	for _, r := range s.cfg.Manifest.Provides.Recurrences {
		if r.Name == name {
			return true
		}
	}
	return false
}

func (s *Service) timerArm(ctx context.Context, p protocol.TimerArmParams) (protocol.TimerArmResult, error) {
	var out protocol.TimerArmResult
	g := s.generation()
	switch {
	case p.Key == "":
		return out, protocol.Errorf(protocol.CodeInvalid, "a timer needs a key")
	case !s.declaredRecurrence(p.Recurrence):
		return out, protocol.Errorf(protocol.CodeUndeclared, "recurrence %q is not declared by %s", p.Recurrence, s.name)
	case !g.scopes[p.ScopeID]:
		return out, protocol.Errorf(protocol.CodeUnauthorized, "scope %q is not one of the configured scopes of %s", p.ScopeID, s.name)
	}
	if err := s.cfg.Manifest.CheckWrite(p.Schema); err != nil {
		return out, err
	}
	st, err := s.store()
	if err != nil {
		return out, err
	}
	err = st.Transact(ctx, func(tx runtime.Tx) error {
		if p.WorkID != "" {
			if _, err := s.visibleWork(tx, g, p.WorkID); err != nil {
				return err
			}
		}
		t, err := tx.ArmTimer(runtime.Timer{Key: s.timerPrefix() + p.Key, ScopeID: p.ScopeID, WorkID: p.WorkID,
			Kind: p.Recurrence, Due: p.Due, Payload: p.Payload})
		out.Timer = wireTimer(s.timerPrefix(), t)
		return err
	})
	if err == nil {
		s.kick()
	}
	return out, err
}

func (s *Service) timerCancel(ctx context.Context, p protocol.TimerCancelParams) (protocol.TimerCancelResult, error) {
	var out protocol.TimerCancelResult
	st, err := s.store()
	if err != nil {
		return out, err
	}
	err = st.Transact(ctx, func(tx runtime.Tx) error {
		ok, err := tx.CancelTimer(s.timerPrefix() + p.Key)
		out.Cancelled = ok
		return err
	})
	return out, err
}

// ---- secrets ----

func (s *Service) secretResolve(ctx context.Context, p protocol.SecretResolveParams) (protocol.SecretResolveResult, error) {
	var out protocol.SecretResolveResult
	g := s.generation()
	bound := false
	if p.ScopeID != "" {
		bound = g.scopeConnections[p.ScopeID][p.Connection]
	} else {
		for _, conns := range g.scopeConnections {
			bound = bound || conns[p.Connection]
		}
	}
	if !bound {
		return out, protocol.Errorf(protocol.CodeUnauthorized, "connection %q is not bound to an entry or binding of %s", p.Connection, s.name)
	}
	conn := g.connections[p.Connection]
	names := p.Names
	if len(names) == 0 {
		names = conn.SecretNames
	}
	for _, n := range names {
		if !slices.Contains(conn.SecretNames, n) {
			return out, protocol.Errorf(protocol.CodeUnauthorized, "connection %q has no secret %q", p.Connection, n)
		}
	}
	if s.cfg.Secrets == nil {
		return out, protocol.NewError(protocol.CodeUnsupported, "no secret resolver")
	}
	values, err := s.cfg.Secrets.ResolveSecrets(ctx, p.Connection, names)
	if err != nil {
		// The resolver's error may quote a reference; the extension gets none.
		s.logf("resolving the secrets of connection %q failed", p.Connection)
		return out, protocol.Errorf(protocol.CodeNotFound, "the secrets of connection %q could not be resolved", p.Connection)
	}
	out.Values = values
	return out, nil
}

// ---- work and waits ----

func (s *Service) workCancel(ctx context.Context, p protocol.WorkCancelParams) (protocol.WorkCancelResult, error) {
	var out protocol.WorkCancelResult
	g := s.generation()
	st, err := s.store()
	if err != nil {
		return out, err
	}
	if s.cfg.Engine != nil {
		var open bool
		err := st.View(ctx, func(tx runtime.ReadTx) error {
			w, err := s.visibleWork(tx, g, p.WorkID)
			if err != nil {
				return err
			}
			if !s.ownKind(w.Kind) {
				return protocol.Errorf(protocol.CodeUnauthorized, "work %q is of kind %q, not one of %s's", p.WorkID, w.Kind, s.name)
			}
			open = !w.State.Terminal()
			return nil
		})
		if err != nil || !open {
			return out, err
		}
		out.Cancelled = true
		return out, s.cfg.Engine.CancelWork(ctx, p.WorkID)
	}
	err = st.Transact(ctx, func(tx runtime.Tx) error {
		w, err := s.visibleWork(tx, g, p.WorkID)
		if err != nil {
			return err
		}
		if !s.ownKind(w.Kind) {
			return protocol.Errorf(protocol.CodeUnauthorized, "work %q is of kind %q, not one of %s's", p.WorkID, w.Kind, s.name)
		}
		if w.State.Terminal() {
			return nil
		}
		if aw, err := tx.ActiveWait(w.ID); err == nil {
			aw.State = runtime.WaitCancelled
			if _, err := tx.PutWait(aw); err != nil {
				return err
			}
		}
		w.State = runtime.WorkCancelled
		_, err = tx.PutWork(w)
		out.Cancelled = err == nil
		return err
	})
	return out, err
}

func (s *Service) waitProgress(ctx context.Context, p protocol.WaitProgressParams) (protocol.WaitProgressResult, error) {
	var out protocol.WaitProgressResult
	g := s.generation()
	st, err := s.store()
	if err != nil {
		return out, err
	}
	// One line the operator reads, clipped as the runtime clips it for an
	// in-process caller: no control characters, whole characters only.
	progress := runtime.ClipLine(p.Progress, runtime.MaxWaitProgress)
	err = st.Transact(ctx, func(tx runtime.Tx) error {
		if _, err := s.visibleWork(tx, g, p.WorkID); err != nil {
			return err
		}
		w, err := tx.ActiveWait(p.WorkID)
		if err != nil {
			return err
		}
		if w.Owner != s.name {
			return protocol.Errorf(protocol.CodeUnauthorized, "the active wait of work %q is not %s's", p.WorkID, s.name)
		}
		return tx.SetWaitProgress(w.ID, s.name, progress)
	})
	return out, err
}

// ---- ingress ----

func (s *Service) ingressDeliver(ctx context.Context, p protocol.IngressDeliverParams) (protocol.IngressDeliverResult, error) {
	out := protocol.IngressDeliverResult{Accepted: []protocol.EmissionOutcome{}}
	g := s.generation()
	src, ok := g.sources[p.Source]
	if !ok {
		return out, protocol.Errorf(protocol.CodeUnauthorized, "source %q is not registered by the last configure of %s", p.Source, s.name)
	}
	ems := make([]protocol.Emission, len(p.Events))
	for i, d := range p.Events {
		if d.Source != "" && d.Source != p.Source {
			return out, protocol.Errorf(protocol.CodeInvalid, "event %d names source %q, not %q", i, d.Source, p.Source)
		}
		scope := d.ScopeID
		if scope == "" {
			scope = src.ScopeID
		}
		if src.ScopeID != "" && scope != src.ScopeID {
			return out, protocol.Errorf(protocol.CodeUnauthorized, "event %d: source %q delivers into scope %q only", i, p.Source, src.ScopeID)
		}
		if !slices.Contains(src.Families, d.Family) {
			return out, protocol.Errorf(protocol.CodeUndeclared, "event %d: family %q is not one of source %q", i, d.Family, p.Source)
		}
		ems[i] = protocol.Emission{Source: p.Source, DeliveryID: d.DeliveryID, ScopeID: scope, Family: d.Family,
			Type: d.Type, Schema: d.Schema, Payload: d.Payload, Works: d.Works, OccurredAt: d.OccurredAt}
		if err := s.checkDraft(g, ems[i]); err != nil {
			return out, fmt.Errorf("event %d: %w", i, err)
		}
	}
	st, err := s.store()
	if err != nil {
		return out, err
	}
	err = st.Transact(ctx, func(tx runtime.Tx) error {
		out.Accepted = out.Accepted[:0]
		for i, e := range ems {
			if err := s.namedWorks(tx, g, e.Works); err != nil {
				return fmt.Errorf("event %d: %w", i, err)
			}
			ev, added, err := tx.AcceptEvent(runtime.Envelope{Source: e.Source, DeliveryID: e.DeliveryID,
				ScopeID: e.ScopeID, Family: e.Family, Type: e.Type, Schema: e.Schema, Payload: e.Payload,
				Works: e.Works, OccurredAt: e.OccurredAt})
			if err != nil {
				return fmt.Errorf("event %d: %w", i, err)
			}
			wev := wireEvent(ev)
			out.Accepted = append(out.Accepted, protocol.EmissionOutcome{Event: &wev, Added: added})
		}
		return nil
	})
	if err == nil {
		s.kick()
	}
	return out, err
}

// ---- runs and artifacts ----

// Run is a run the host opened for this extension: artifacts and recovery
// persistence are accepted only through one.
type Run struct {
	ID          string
	WorkID      string
	ExecutionID string
	// Persist is the run's lease-fenced recovery persistence.
	Persist runtime.RecoveryPersister
}

type artifactTable struct {
	mu   sync.Mutex
	runs map[string]Run
	open map[string]*openArtifact
}

type openArtifact struct {
	run       Run
	name      string
	mediaType string
	w         runtime.BlobWriter
	size      int64 // bytes accepted: written, or in the write in flight
	// writing is the one chunk write in flight (see write), nil when none;
	// failed is the first write that failed, which the artifact keeps.
	writing chan error
	failed  error
	// spare holds the chunk being written: a chunk's bytes are the
	// caller's (a buffer it reuses), so write takes them over or copies
	// them here first.
	spare []byte
}

// write hands a chunk to the blob writer in a goroutine of its own, after
// the chunk before it is written: the chunk is acknowledged while it is
// written and hashed, which overlaps with the extension encoding the
// next one. At most one chunk is in flight, so the acknowledgement still
// paces the writer (a chunk waits for the one before it), and a write
// that fails fails the next chunk and the commit, which never keeps a
// blob that missed a chunk. slot, when not nil, holds data's memory
// (serveChunk's pool): write then takes that memory and leaves spare's in
// the slot, instead of copying the chunk. The caller holds the table's
// lock.
func (a *openArtifact) write(data []byte, slot *[]byte) error {
	if err := a.settle(); err != nil {
		return err
	}
	// Settled: the chunk before is written and spare free again.
	if slot != nil {
		*slot, a.spare = a.spare[:0], data
	} else {
		a.spare = append(a.spare[:0], data...)
	}
	chunk := a.spare
	done := make(chan error, 1)
	a.writing = done
	go func() {
		_, err := a.w.Write(chunk)
		done <- err
	}()
	return nil
}

// settle waits for the chunk write in flight and returns the first write
// error the artifact met. After it the blob writer is the caller's alone.
func (a *openArtifact) settle() error {
	if a.writing != nil {
		if err := <-a.writing; err != nil && a.failed == nil {
			a.failed = err
		}
		a.writing = nil
	}
	return a.failed
}

// abort settles the artifact's writes and discards its blob.
func (a *openArtifact) abort() error {
	_ = a.settle() // what failed is discarded with the rest
	return a.w.Abort()
}

// OpenRun registers a run with an unguessable id and returns it.
func (s *Service) OpenRun(workID, executionID string, persist runtime.RecoveryPersister) Run {
	var b [16]byte
	rand.Read(b[:])
	r := Run{ID: "run_" + hex.EncodeToString(b[:]), WorkID: workID, ExecutionID: executionID, Persist: persist}
	s.artifacts.mu.Lock()
	if s.artifacts.runs == nil {
		s.artifacts.runs = map[string]Run{}
	}
	s.artifacts.runs[r.ID] = r
	s.artifacts.mu.Unlock()
	return r
}

// OpenRecordingRun opens a run whose persisted recovery metadata the host
// keeps in memory, for a driver that hands it back to executor.recover
// itself (conformance and certification drive executors without the
// scheduler). last reads the metadata persisted most recently, nil before
// any.
func (s *Service) OpenRecordingRun(workID, executionID string) (id string, last func() json.RawMessage) {
	var mu sync.Mutex
	var kept json.RawMessage
	r := s.OpenRun(workID, executionID, func(_ context.Context, metadata json.RawMessage) error {
		mu.Lock()
		defer mu.Unlock()
		kept = append(json.RawMessage(nil), metadata...)
		return nil
	})
	return r.ID, func() json.RawMessage {
		mu.Lock()
		defer mu.Unlock()
		return kept
	}
}

// CloseRun closes a run: later persistence and artifacts for it are
// refused, and its open artifacts are aborted.
func (s *Service) CloseRun(id string) {
	s.artifacts.mu.Lock()
	defer s.artifacts.mu.Unlock()
	delete(s.artifacts.runs, id)
	for aid, a := range s.artifacts.open {
		if a.run.ID == id {
			a.abort()
			delete(s.artifacts.open, aid)
		}
	}
}

// AbortArtifacts aborts every open artifact writer (after a crash).
func (s *Service) AbortArtifacts() {
	s.artifacts.mu.Lock()
	defer s.artifacts.mu.Unlock()
	for aid, a := range s.artifacts.open {
		a.abort()
		delete(s.artifacts.open, aid)
	}
}

func (s *Service) run(id string) (Run, error) {
	s.artifacts.mu.Lock()
	defer s.artifacts.mu.Unlock()
	r, ok := s.artifacts.runs[id]
	if !ok {
		return Run{}, protocol.Errorf(protocol.CodeNotFound, "run %q is not open for %s", id, s.name)
	}
	return r, nil
}

func (s *Service) artifact(id string) (*openArtifact, error) {
	s.artifacts.mu.Lock()
	defer s.artifacts.mu.Unlock()
	a, ok := s.artifacts.open[id]
	if !ok {
		return nil, protocol.Errorf(protocol.CodeNotFound, "artifact %q is not open", id)
	}
	return a, nil
}

func (s *Service) artifactCreate(ctx context.Context, p protocol.ArtifactCreateParams) (protocol.ArtifactCreateResult, error) {
	var out protocol.ArtifactCreateResult
	r, err := s.run(p.RunID)
	if err != nil {
		return out, err
	}
	if s.cfg.Blobs == nil {
		return out, protocol.NewError(protocol.CodeUnsupported, "no artifact store")
	}
	if p.Name == "" {
		return out, protocol.Errorf(protocol.CodeInvalid, "an artifact needs a name")
	}
	w, err := s.cfg.Blobs.CreateBlob()
	if err != nil {
		return out, err
	}
	var b [16]byte
	rand.Read(b[:])
	id := "art_" + hex.EncodeToString(b[:])
	s.artifacts.mu.Lock()
	if s.artifacts.open == nil {
		s.artifacts.open = map[string]*openArtifact{}
	}
	s.artifacts.open[id] = &openArtifact{run: r, name: p.Name, mediaType: p.MediaType, w: w}
	s.artifacts.mu.Unlock()
	out.ArtifactID = id
	return out, nil
}

// artifactWrite serves artifact.write; slot is p.Data's memory, which it
// may take (see serveChunk), or nil.
func (s *Service) artifactWrite(ctx context.Context, p protocol.ArtifactWriteParams, slot *[]byte) (protocol.ArtifactWriteResult, error) {
	var out protocol.ArtifactWriteResult
	if len(p.Data) > protocol.MaxChunkBytes {
		return out, protocol.Errorf(protocol.CodeInvalid, "a chunk is at most %d bytes, not %d", protocol.MaxChunkBytes, len(p.Data))
	}
	a, err := s.artifact(p.ArtifactID)
	if err != nil {
		return out, err
	}
	s.artifacts.mu.Lock()
	defer s.artifacts.mu.Unlock()
	if s.artifacts.open[p.ArtifactID] != a {
		// Committed or aborted since: its writer is no longer ours.
		return out, protocol.Errorf(protocol.CodeNotFound, "artifact %q is not open", p.ArtifactID)
	}
	switch {
	case p.Offset+int64(len(p.Data)) <= a.size && p.Offset >= 0:
		// A chunk sent again: already written.
	case p.Offset != a.size:
		return out, protocol.Errorf(protocol.CodeInvalid, "chunk at offset %d, but %d bytes are written", p.Offset, a.size)
	default:
		if err := a.write(p.Data, slot); err != nil {
			return out, err
		}
		a.size += int64(len(p.Data))
	}
	out.Size = a.size
	return out, nil
}

func (s *Service) artifactCommit(ctx context.Context, p protocol.ArtifactCommitParams) (protocol.ArtifactCommitResult, error) {
	var out protocol.ArtifactCommitResult
	a, err := s.artifact(p.ArtifactID)
	if err != nil {
		return out, err
	}
	s.artifacts.mu.Lock()
	delete(s.artifacts.open, p.ArtifactID)
	werr := a.settle()
	s.artifacts.mu.Unlock()
	if werr != nil {
		a.w.Abort()
		return out, werr
	}
	if p.Size != a.size {
		a.w.Abort()
		return out, protocol.Errorf(protocol.CodeInvalid, "the writer wrote %d bytes, the host received %d", p.Size, a.size)
	}
	digest, size, err := a.w.Commit()
	if err != nil {
		return out, err
	}
	st, err := s.store()
	if err != nil {
		return out, err
	}
	err = st.Transact(ctx, func(tx runtime.Tx) error {
		_, err := tx.PutArtifact(runtime.Artifact{ID: p.ArtifactID, WorkID: a.run.WorkID, ExecutionID: a.run.ExecutionID,
			Name: a.name, MediaType: a.mediaType, Digest: digest, Size: size})
		return err
	})
	if err != nil {
		return out, err
	}
	return protocol.ArtifactCommitResult{ArtifactID: p.ArtifactID, Size: size, SHA256: strings.TrimPrefix(digest, "sha256:")}, nil
}

func (s *Service) artifactAbort(ctx context.Context, p protocol.ArtifactAbortParams) (protocol.ArtifactAbortResult, error) {
	a, err := s.artifact(p.ArtifactID)
	if err != nil {
		return protocol.ArtifactAbortResult{}, err
	}
	s.artifacts.mu.Lock()
	delete(s.artifacts.open, p.ArtifactID)
	err = a.abort()
	s.artifacts.mu.Unlock()
	return protocol.ArtifactAbortResult{}, errors.Join(err)
}

func (s *Service) persistRecovery(ctx context.Context, p protocol.ExecutionPersistRecoveryParams) (protocol.ExecutionPersistRecoveryResult, error) {
	var out protocol.ExecutionPersistRecoveryResult
	r, err := s.run(p.RunID)
	if err != nil {
		return out, err
	}
	if r.Persist == nil {
		return out, protocol.Errorf(protocol.CodeConflict, "run %q persists nothing", p.RunID)
	}
	return out, r.Persist(ctx, p.Recovery)
}
