package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// The methods of the transport suite. The test.* and artifact.* methods are
// served by the extension side (TransportPeer), the host.* methods by the
// host side the suite builds.
const (
	methodInitialize     = "initialize"
	methodEcho           = "test.echo"
	methodFail           = "test.fail"
	methodCallback       = "test.callback"
	methodPush           = "test.push"
	methodBlock          = "test.block"
	methodBlockStarted   = "test.block_started"
	methodCancelledSeen  = "test.cancelled_seen"
	methodRelease        = "test.release"
	methodCrash          = "test.crash"
	methodStdout         = "test.stdout"
	methodArtifactWrite  = "artifact.write"
	methodArtifactCommit = "artifact.commit"
	methodHostEcho       = "host.echo"
	methodHostPush       = "host.push"
)

// Wire shapes of the suite's methods.
type (
	initializeParams struct {
		ProtocolVersions []protocol.Version `json:"protocol_versions"`
		Host             hostInfo           `json:"host"`
	}
	hostInfo struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	initializeResult struct {
		ProtocolVersion protocol.Version `json:"protocol_version"`
	}
	failParams struct {
		Code       protocol.Code `json:"code,omitempty"`
		Message    string        `json:"message,omitempty"`
		Unauthored string        `json:"unauthored,omitempty"`
	}
	callbackParams struct {
		N int `json:"n"`
	}
	callbackResult struct {
		Count int `json:"count"`
	}
	hostEchoParams struct {
		Seq int `json:"seq"`
	}
	pushParams struct {
		Value string `json:"value"`
	}
	pushAnswer struct {
		Ack string `json:"ack"`
	}
	pushResult struct {
		HostAnswer string `json:"host_answer"`
	}
	tokenParams struct {
		Token string `json:"token"`
	}
	seenResult struct {
		Seen bool `json:"seen"`
	}
	okResult struct {
		OK bool `json:"ok"`
	}
	chunkParams struct {
		Upload string `json:"upload"`
		Offset int64  `json:"offset"`
		Data   []byte `json:"data"`
	}
	chunkAck struct {
		Bytes int64 `json:"bytes"`
	}
	commitParams struct {
		Upload string `json:"upload"`
		Bytes  int64  `json:"bytes"`
		SHA256 string `json:"sha256"`
	}
	commitResult struct {
		Bytes  int64  `json:"bytes"`
		SHA256 string `json:"sha256"`
	}
)

// StrayOutput is what test.stdout writes to TransportPeer.Stdout.
const StrayOutput = "stray output from extension code\n"

// TransportPeer is the extension side of the transport suite: the methods
// the checks drive, served by one Conn. Use one TransportPeer per
// connection; its zero value serves every method except test.crash and
// makes test.stdout a no-op.
type TransportPeer struct {
	// Crash ends the process at once, as a crash would (os.Exit with a
	// non-zero status); test.crash calls it mid-call. Leave it nil when the
	// peer runs in the host's process: test.crash then answers unsupported.
	Crash func()

	// Stdout is where test.stdout writes StrayOutput: the process's
	// os.Stdout, which a subprocess peer must already have moved off the
	// protocol stream (to stderr). Nil makes test.stdout a no-op.
	Stdout io.Writer

	mu      sync.Mutex
	blocks  map[string]*blockState
	uploads map[string]*upload
}

// blockState follows one test.block call, named by its token.
type blockState struct {
	started, seen, release           chan struct{}
	startOnce, seenOnce, releaseOnce sync.Once
}

type upload struct {
	hash  hash.Hash
	bytes int64
}

// ServeTransportPeer serves p on r and w until the stream ends or ctx is
// done, and returns why the connection ended (an error wrapping
// jsonrpc.ErrTransport). The peer's handlers keep no raw params, so the
// connection reuses their memory (jsonrpc.Options.ReuseParams).
func ServeTransportPeer(ctx context.Context, r io.Reader, w io.Writer, p *TransportPeer) error {
	conn := jsonrpc.NewConn(r, w, p.Handler(), &jsonrpc.Options{DecodeError: decodeWireError, ReuseParams: true})
	select {
	case <-conn.Done():
	case <-ctx.Done():
		_ = conn.Close()
	}
	return conn.Err()
}

// decodeWireError maps a JSON-RPC error onto the protocol's sentinels.
func decodeWireError(code int, message string, data json.RawMessage) error {
	return protocol.DecodeWireError(code, message, data)
}

// Handler returns the peer's methods.
func (p *TransportPeer) Handler() jsonrpc.Methods {
	return jsonrpc.Methods{
		methodInitialize:     p.initialize,
		methodEcho:           p.echo,
		methodFail:           p.fail,
		methodCallback:       p.callback,
		methodPush:           p.push,
		methodBlock:          p.block,
		methodBlockStarted:   p.blockStarted,
		methodCancelledSeen:  p.cancelledSeen,
		methodRelease:        p.release,
		methodCrash:          p.crash,
		methodStdout:         p.stdout,
		methodArtifactWrite:  p.artifactWrite,
		methodArtifactCommit: p.artifactCommit,
	}
}

func (p *TransportPeer) initialize(_ context.Context, req *jsonrpc.Request) (any, error) {
	var in initializeParams
	if err := req.DecodeParams(&in); err != nil {
		return nil, err
	}
	v, err := protocol.Negotiate(protocol.SupportedVersions(), in.ProtocolVersions)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeUnsupportedProtocolVersion,
			"no common protocol version: the extension speaks %v, the host offered %v",
			protocol.SupportedVersions(), in.ProtocolVersions)
	}
	return initializeResult{ProtocolVersion: v}, nil
}

// echo answers with the params exactly as they arrived.
func (p *TransportPeer) echo(_ context.Context, req *jsonrpc.Request) (any, error) {
	return req.Params, nil
}

// fail returns the authored error the params describe, or an unauthored
// one whose text must not reach the caller.
func (p *TransportPeer) fail(_ context.Context, req *jsonrpc.Request) (any, error) {
	var in failParams
	if err := req.DecodeParams(&in); err != nil {
		return nil, err
	}
	if in.Unauthored != "" {
		return nil, errors.New(in.Unauthored)
	}
	return nil, fmt.Errorf("test.fail as asked: %w", protocol.NewError(in.Code, in.Message))
}

// callback calls the host's host.echo n times, one after another, while
// serving this request.
func (p *TransportPeer) callback(ctx context.Context, req *jsonrpc.Request) (any, error) {
	var in callbackParams
	if err := req.DecodeParams(&in); err != nil {
		return nil, err
	}
	conn := jsonrpc.ConnFromContext(ctx)
	for i := range in.N {
		var out hostEchoParams
		if err := conn.Call(ctx, methodHostEcho, hostEchoParams{Seq: i}, &out); err != nil {
			return nil, fmt.Errorf("callback %d: %w", i, err)
		}
		if out.Seq != i {
			return nil, protocol.Errorf(protocol.CodeConflict, "callback %d was answered with %d", i, out.Seq)
		}
	}
	return callbackResult{Count: in.N}, nil
}

// push makes a call of its own to the host and answers with the host's
// answer.
func (p *TransportPeer) push(ctx context.Context, req *jsonrpc.Request) (any, error) {
	var in pushParams
	if err := req.DecodeParams(&in); err != nil {
		return nil, err
	}
	var ans pushAnswer
	if err := jsonrpc.ConnFromContext(ctx).Call(ctx, methodHostPush, in, &ans); err != nil {
		return nil, err
	}
	return pushResult{HostAnswer: ans.Ack}, nil
}

func (p *TransportPeer) blockFor(token string) *blockState {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocks == nil {
		p.blocks = map[string]*blockState{}
	}
	b := p.blocks[token]
	if b == nil {
		b = &blockState{started: make(chan struct{}), seen: make(chan struct{}), release: make(chan struct{})}
		p.blocks[token] = b
	}
	return b
}

// block waits for its cancellation, records that it saw it, and answers
// only once released, so the caller cannot be waiting for the answer.
func (p *TransportPeer) block(ctx context.Context, req *jsonrpc.Request) (any, error) {
	var in tokenParams
	if err := req.DecodeParams(&in); err != nil {
		return nil, err
	}
	b := p.blockFor(in.Token)
	b.startOnce.Do(func() { close(b.started) })
	<-ctx.Done()
	b.seenOnce.Do(func() { close(b.seen) })
	select {
	case <-b.release:
	case <-jsonrpc.ConnFromContext(ctx).Done():
	}
	return nil, ctx.Err()
}

func (p *TransportPeer) blockStarted(ctx context.Context, req *jsonrpc.Request) (any, error) {
	return p.awaitBlock(ctx, req, func(b *blockState) chan struct{} { return b.started })
}

func (p *TransportPeer) cancelledSeen(ctx context.Context, req *jsonrpc.Request) (any, error) {
	return p.awaitBlock(ctx, req, func(b *blockState) chan struct{} { return b.seen })
}

func (p *TransportPeer) awaitBlock(ctx context.Context, req *jsonrpc.Request, ch func(*blockState) chan struct{}) (any, error) {
	var in tokenParams
	if err := req.DecodeParams(&in); err != nil {
		return nil, err
	}
	select {
	case <-ch(p.blockFor(in.Token)):
		return seenResult{Seen: true}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *TransportPeer) release(_ context.Context, req *jsonrpc.Request) (any, error) {
	var in tokenParams
	if err := req.DecodeParams(&in); err != nil {
		return nil, err
	}
	b := p.blockFor(in.Token)
	b.releaseOnce.Do(func() { close(b.release) })
	return okResult{OK: true}, nil
}

func (p *TransportPeer) crash(context.Context, *jsonrpc.Request) (any, error) {
	if p.Crash == nil {
		return nil, protocol.NewError(protocol.CodeUnsupported, "test.crash needs a peer in its own process")
	}
	p.Crash()
	return nil, protocol.NewError(protocol.CodeInternal, "the crash hook returned")
}

func (p *TransportPeer) stdout(context.Context, *jsonrpc.Request) (any, error) {
	if p.Stdout != nil {
		if _, err := io.WriteString(p.Stdout, StrayOutput); err != nil {
			return nil, err
		}
	}
	return okResult{OK: true}, nil
}

// artifactWrite appends one chunk to an upload and acknowledges the bytes
// received so far; a chunk at the wrong offset is a conflict.
func (p *TransportPeer) artifactWrite(_ context.Context, req *jsonrpc.Request) (any, error) {
	var in chunkParams
	if err := req.DecodeParams(&in); err != nil {
		return nil, err
	}
	if len(in.Data) > protocol.MaxChunkBytes {
		return nil, protocol.Errorf(protocol.CodeInvalid, "chunk of %d bytes exceeds %d", len(in.Data), protocol.MaxChunkBytes)
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
		return nil, protocol.Errorf(protocol.CodeConflict, "chunk at offset %d, expected %d", in.Offset, u.bytes)
	}
	u.hash.Write(in.Data)
	u.bytes += int64(len(in.Data))
	return chunkAck{Bytes: u.bytes}, nil
}

// artifactCommit checks the upload's length and digest and closes it.
func (p *TransportPeer) artifactCommit(_ context.Context, req *jsonrpc.Request) (any, error) {
	var in commitParams
	if err := req.DecodeParams(&in); err != nil {
		return nil, err
	}
	p.mu.Lock()
	u := p.uploads[in.Upload]
	delete(p.uploads, in.Upload)
	p.mu.Unlock()
	if u == nil {
		return nil, protocol.Errorf(protocol.CodeNotFound, "no upload %q", in.Upload)
	}
	got := commitResult{Bytes: u.bytes, SHA256: hex.EncodeToString(u.hash.Sum(nil))}
	if got.Bytes != in.Bytes || got.SHA256 != in.SHA256 {
		return nil, protocol.Errorf(protocol.CodeConflict, "upload %q holds %d bytes with sha256 %s, not %d bytes with %s",
			in.Upload, got.Bytes, got.SHA256, in.Bytes, in.SHA256)
	}
	return got, nil
}
