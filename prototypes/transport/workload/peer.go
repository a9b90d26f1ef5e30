package workload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"time"
)

// Authored is an error the extension means the host to see, with its
// stable code; every transport carries it verbatim.
type Authored struct {
	Code    string
	Message string
}

func (e *Authored) Error() string { return e.Code + ": " + e.Message }

// Peer is the transport-neutral extension side: each transport's binary
// decodes a request, calls the Peer method and encodes its answer. Host
// callbacks go through Host, which the binary binds to its connection.
type Peer struct {
	// Stdout is where bench.stdout writes (the process's os.Stdout after
	// the transport moved it off the protocol stream, if it had to).
	Stdout io.Writer
	// Crash ends the process at once.
	Crash func()

	mu      sync.Mutex
	blocks  map[string]*block
	uploads map[string]*upload
}

type block struct {
	started, seen, release chan struct{}
	once                   [3]sync.Once
	seenAt                 int64
}

type upload struct {
	hash  hash.Hash
	bytes int64
}

// HostCaller makes one callback to the host.
type HostCaller func(ctx context.Context, method string, params, result any) error

// Initialize agrees on Version or refuses with unsupported_protocol_version,
// the same words every time.
func (p *Peer) Initialize(in InitializeParams) (InitializeResult, error) {
	for _, v := range in.ProtocolVersions {
		if v == Version {
			return InitializeResult{ProtocolVersion: Version, Name: "bench"}, nil
		}
	}
	return InitializeResult{}, &Authored{Code: "unsupported_protocol_version",
		Message: fmt.Sprintf("no common protocol version: the extension speaks [%d], the host offered %v", Version, in.ProtocolVersions)}
}

// Fail returns the error the params describe.
func (p *Peer) Fail(in FailParams) error {
	if in.Unauthored != "" {
		return errors.New(in.Unauthored)
	}
	return &Authored{Code: in.Code, Message: in.Message}
}

// Callback calls host.echo n times, one after another.
func (p *Peer) Callback(ctx context.Context, call HostCaller, in CallbackParams) (CallbackResult, error) {
	for i := range in.N {
		var out HostEcho
		if err := call(ctx, MethodHostEcho, HostEcho{Seq: i}, &out); err != nil {
			return CallbackResult{}, fmt.Errorf("callback %d: %w", i, err)
		}
		if out.Seq != i {
			return CallbackResult{}, &Authored{Code: "conflict", Message: fmt.Sprintf("callback %d answered with %d", i, out.Seq)}
		}
	}
	return CallbackResult{Count: in.N}, nil
}

// Push calls the host and relays its answer.
func (p *Peer) Push(ctx context.Context, call HostCaller, in PushParams) (PushResult, error) {
	var ans PushAnswer
	if err := call(ctx, MethodHostPush, in, &ans); err != nil {
		return PushResult{}, err
	}
	return PushResult{HostAnswer: ans.Ack}, nil
}

func (p *Peer) block(token string) *block {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocks == nil {
		p.blocks = map[string]*block{}
	}
	b := p.blocks[token]
	if b == nil {
		b = &block{started: make(chan struct{}), seen: make(chan struct{}), release: make(chan struct{})}
		p.blocks[token] = b
	}
	return b
}

// Block waits for its cancellation, notes when it saw it, and answers only
// once released (or when done ends: the connection is gone).
func (p *Peer) Block(ctx context.Context, done <-chan struct{}, in TokenParams) error {
	b := p.block(in.Token)
	b.once[0].Do(func() { close(b.started) })
	<-ctx.Done()
	at := time.Now().UnixNano()
	b.once[1].Do(func() { b.seenAt = at; close(b.seen) })
	select {
	case <-b.release:
	case <-done:
	}
	return ctx.Err()
}

// BlockStarted answers once the named Block runs.
func (p *Peer) BlockStarted(ctx context.Context, in TokenParams) (OK, error) {
	select {
	case <-p.block(in.Token).started:
		return OK{OK: true}, nil
	case <-ctx.Done():
		return OK{}, ctx.Err()
	}
}

// CancelSeen answers once the named Block saw its cancellation, and when.
func (p *Peer) CancelSeen(ctx context.Context, in TokenParams) (SeenResult, error) {
	b := p.block(in.Token)
	select {
	case <-b.seen:
		return SeenResult{Seen: true, SeenAt: b.seenAt}, nil
	case <-ctx.Done():
		return SeenResult{}, ctx.Err()
	}
}

// Release lets the named Block answer (late: its caller has gone).
func (p *Peer) Release(in TokenParams) OK {
	b := p.block(in.Token)
	b.once[2].Do(func() { close(b.release) })
	return OK{OK: true}
}

// Print writes StrayOutput where extension code would.
func (p *Peer) Print() (OK, error) {
	if p.Stdout != nil {
		if _, err := io.WriteString(p.Stdout, StrayOutput); err != nil {
			return OK{}, err
		}
	}
	return OK{OK: true}, nil
}

// DoCrash ends the process mid-call.
func (p *Peer) DoCrash() error {
	if p.Crash != nil {
		p.Crash()
	}
	return &Authored{Code: "unsupported", Message: "no crash hook"}
}

// MaxChunk bounds one chunk, as protocol.MaxChunkBytes does.
const MaxChunk = 256 << 10

// Chunk appends one chunk to an upload and acknowledges the bytes so far.
func (p *Peer) Chunk(in ChunkParams) (ChunkAck, error) {
	if len(in.Data) > MaxChunk {
		return ChunkAck{}, &Authored{Code: "invalid", Message: fmt.Sprintf("chunk of %d bytes exceeds %d", len(in.Data), MaxChunk)}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.uploads == nil {
		p.uploads = map[string]*upload{}
	}
	u := p.uploads[in.Upload]
	if u == nil {
		u = &upload{hash: sha256.New()}
		p.uploads[in.Upload] = u
	}
	if in.Offset != u.bytes {
		return ChunkAck{}, &Authored{Code: "conflict", Message: fmt.Sprintf("chunk at %d, expected %d", in.Offset, u.bytes)}
	}
	u.hash.Write(in.Data)
	u.bytes += int64(len(in.Data))
	return ChunkAck{Bytes: u.bytes}, nil
}

// Commit closes an upload, checking its length and digest.
func (p *Peer) Commit(in CommitParams) (CommitResult, error) {
	p.mu.Lock()
	u := p.uploads[in.Upload]
	delete(p.uploads, in.Upload)
	p.mu.Unlock()
	if u == nil {
		return CommitResult{}, &Authored{Code: "not_found", Message: fmt.Sprintf("no upload %q", in.Upload)}
	}
	got := CommitResult{Bytes: u.bytes, SHA256: hex.EncodeToString(u.hash.Sum(nil))}
	if got != (CommitResult{Bytes: in.Bytes, SHA256: in.SHA256}) {
		return CommitResult{}, &Authored{Code: "conflict", Message: fmt.Sprintf("upload holds %d bytes %s", got.Bytes, got.SHA256)}
	}
	return got, nil
}
