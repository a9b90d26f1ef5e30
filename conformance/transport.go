package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// TransportEndpoint is the host's end of one running extension: the two
// streams of its protocol connection and a way to end it.
type TransportEndpoint struct {
	// Reader reads what the extension writes (its stdout).
	Reader io.Reader
	// Writer writes what the extension reads (its stdin). Closing it is
	// end of input for the extension, which must then exit.
	Writer io.WriteCloser
	// Stop ends the extension and releases what Start took. The suite
	// calls it once per endpoint, after closing the connection, also when
	// the extension crashed; an error it returns after a crash is ignored.
	Stop func() error
}

// TransportDriver starts extensions that serve the TransportPeer methods.
type TransportDriver struct {
	// Start launches a fresh extension and returns the host's end of it.
	// Every check starts its own; crash_mid_call starts a second one after
	// the first crashed, as the host's restart would.
	Start func(ctx context.Context) (TransportEndpoint, error)

	// Subprocess says each extension runs in its own process, so
	// test.crash really ends it. crash_mid_call runs only then.
	Subprocess bool
}

// TransportCheckTimeout bounds one check of the transport suite, so a
// transport that hangs fails instead of stalling the run.
var TransportCheckTimeout = 2 * time.Minute

// transportCheck is one named check of the suite.
type transportCheck struct {
	name           string
	subprocessOnly bool
	run            func(ctx context.Context, s *transportSession, d TransportDriver) error
}

// transportChecks are the spec's semantic checks of a transport, in order.
var transportChecks = []transportCheck{
	{name: "handshake", run: checkHandshake},
	{name: "version_mismatch", run: checkVersionMismatch},
	{name: "sequential_echo", run: checkSequentialEcho},
	{name: "concurrent_echo", run: checkConcurrentEcho},
	{name: "structured_errors", run: checkStructuredErrors},
	{name: "nested_callbacks", run: checkNestedCallbacks},
	{name: "chunked_upload", run: checkChunkedUpload},
	{name: "extension_push", run: checkExtensionPush},
	{name: "cancellation_reaches_handler", run: checkCancellation},
	{name: "stray_stdout", run: checkStrayStdout},
	{name: "crash_mid_call", subprocessOnly: true, run: checkCrashMidCall},
}

// CheckTransport runs every transport check against extensions started by
// d, each on a fresh extension, and returns all failures joined, each
// prefixed with its check's name; nil means the transport conforms.
func CheckTransport(ctx context.Context, d TransportDriver) error {
	return checkAll(ctx, transportSuite(d))
}

// RunTransport runs every transport check as a named subtest of t.
func RunTransport(t *testing.T, d TransportDriver) {
	t.Helper()
	runAll(t, transportSuite(d))
}

// transportSuite binds the checks to d; an in-process driver skips those
// that need an extension in its own process.
func transportSuite(d TransportDriver) []namedCheck {
	return bind(transportChecks, func(c transportCheck) namedCheck {
		nc := namedCheck{name: c.name, run: func(ctx context.Context) error { return runTransportCheck(ctx, d, c) }}
		if c.subprocessOnly && !d.Subprocess {
			nc.skip = "needs an extension in its own process"
		}
		return nc
	})
}

func runTransportCheck(ctx context.Context, d TransportDriver, c transportCheck) (err error) {
	ctx, cancel := context.WithTimeout(ctx, TransportCheckTimeout)
	defer cancel()
	s, err := startTransportSession(ctx, d)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := s.stop(); stopErr != nil && err == nil && !s.crashed {
			err = fmt.Errorf("stopping the extension: %w", stopErr)
		}
	}()
	return c.run(ctx, s, d)
}

// transportSession is one started extension and the host's side of it.
type transportSession struct {
	conn    *jsonrpc.Conn
	host    *transportHost
	ep      TransportEndpoint
	crashed bool

	stopOnce sync.Once
	stopErr  error
}

func startTransportSession(ctx context.Context, d TransportDriver) (*transportSession, error) {
	ep, err := d.Start(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting the extension: %w", err)
	}
	h := &transportHost{}
	conn := jsonrpc.NewConn(ep.Reader, ep.Writer, h.methods(), &jsonrpc.Options{DecodeError: decodeWireError})
	return &transportSession{conn: conn, host: h, ep: ep}, nil
}

// stop closes the host's connection and stops the extension, once.
func (s *transportSession) stop() error {
	s.stopOnce.Do(func() {
		_ = s.conn.Close()
		s.stopErr = s.ep.Stop()
	})
	return s.stopErr
}

// transportHost serves the host's methods and records what it saw.
type transportHost struct {
	echoes atomic.Int64
	mu     sync.Mutex
	pushes []string
}

func (h *transportHost) methods() jsonrpc.Methods {
	return jsonrpc.Methods{
		methodHostEcho: func(_ context.Context, req *jsonrpc.Request) (any, error) {
			h.echoes.Add(1)
			return req.Params, nil
		},
		methodHostPush: func(_ context.Context, req *jsonrpc.Request) (any, error) {
			var in pushParams
			if err := req.DecodeParams(&in); err != nil {
				return nil, err
			}
			h.mu.Lock()
			h.pushes = append(h.pushes, in.Value)
			h.mu.Unlock()
			return pushAnswer{Ack: in.Value + " received"}, nil
		},
	}
}

func checkHandshake(ctx context.Context, s *transportSession, _ TransportDriver) error {
	var res initializeResult
	err := s.conn.Call(ctx, methodInitialize, initializeParams{
		ProtocolVersions: protocol.SupportedVersions(),
		Host:             hostInfo{Name: "conformance", Version: "0"},
	}, &res)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	want, _ := protocol.Negotiate(protocol.SupportedVersions(), protocol.SupportedVersions())
	if res.ProtocolVersion != want {
		return fmt.Errorf("initialize negotiated version %d, want %d", res.ProtocolVersion, want)
	}
	return nil
}

func checkVersionMismatch(ctx context.Context, s *transportSession, _ TransportDriver) error {
	params := initializeParams{ProtocolVersions: []protocol.Version{99}, Host: hostInfo{Name: "conformance", Version: "0"}}
	var first string
	for attempt := range 2 {
		err := s.conn.Call(ctx, methodInitialize, params, nil)
		if !errors.Is(err, protocol.ErrUnsupportedProtocolVersion) {
			return fmt.Errorf("initialize with versions [99], attempt %d: got %v, want %v", attempt+1, err, protocol.ErrUnsupportedProtocolVersion)
		}
		if attempt == 0 {
			first = err.Error()
		} else if err.Error() != first {
			return fmt.Errorf("refusal is not deterministic: %q, then %q", first, err.Error())
		}
	}
	// A refusal is an answer, not a broken connection.
	return echoOnce(ctx, s.conn, 0, 0)
}

type echoParams struct {
	Goroutine int    `json:"goroutine"`
	Seq       int    `json:"seq"`
	Text      string `json:"text"`
}

func echoOnce(ctx context.Context, conn *jsonrpc.Conn, g, seq int) error {
	in := echoParams{Goroutine: g, Seq: seq, Text: fmt.Sprintf("echo %d/%d \u00e9\"\\\n", g, seq)}
	var out echoParams
	if err := conn.Call(ctx, methodEcho, in, &out); err != nil {
		return fmt.Errorf("echo %d/%d: %w", g, seq, err)
	}
	if out != in {
		return fmt.Errorf("echo %d/%d answered with %+v", g, seq, out)
	}
	return nil
}

func checkSequentialEcho(ctx context.Context, s *transportSession, _ TransportDriver) error {
	for i := range 2000 {
		if err := echoOnce(ctx, s.conn, 0, i); err != nil {
			return err
		}
	}
	return nil
}

func checkConcurrentEcho(ctx context.Context, s *transportSession, _ TransportDriver) error {
	const goroutines, calls = 32, 50
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				if err := echoOnce(ctx, s.conn, g, i); err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func checkStructuredErrors(ctx context.Context, s *transportSession, _ TransportDriver) error {
	var errs []error
	for _, want := range []*protocol.Error{
		protocol.NewError(protocol.CodeConflict, "revision 7 is stale; re-read and retry"),
		protocol.NewError(protocol.CodeNotFound, "no record named \"alpha\""),
		protocol.NewError(protocol.CodeResourceExhausted, "disk full: free 2 GiB under /var/cache"),
	} {
		err := s.conn.Call(ctx, methodFail, failParams{Code: want.Code, Message: want.Message}, nil)
		var got *protocol.Error
		switch {
		case !errors.As(err, &got):
			errs = append(errs, fmt.Errorf("test.fail %s: got %v, want an authored error", want.Code, err))
		case !errors.Is(err, protocol.Sentinel(want.Code)) || got.Code != want.Code || got.Message != want.Message:
			errs = append(errs, fmt.Errorf("test.fail %s: got code %q message %q, want %q %q", want.Code, got.Code, got.Message, want.Code, want.Message))
		}
	}

	const secret = "detail that stays in the extension's log"
	err := s.conn.Call(ctx, methodFail, failParams{Unauthored: secret}, nil)
	if !errors.Is(err, protocol.ErrInternal) || strings.Contains(fmt.Sprint(err), secret) {
		errs = append(errs, fmt.Errorf("unauthored failure: got %v, want internal with no detail", err))
	}

	err = s.conn.Call(ctx, "test.no_such_method", nil, nil)
	if !errors.Is(err, protocol.ErrMethodNotFound) || protocol.CodeOf(err).WireNumber() != protocol.WireMethodNotFound {
		errs = append(errs, fmt.Errorf("unknown method: got %v, want %v", err, protocol.ErrMethodNotFound))
	}

	err = s.conn.Call(ctx, methodFail, json.RawMessage(`{"code": 5}`), nil)
	if !errors.Is(err, protocol.ErrInvalidParams) {
		errs = append(errs, fmt.Errorf("params of the wrong type: got %v, want %v", err, protocol.ErrInvalidParams))
	}
	return errors.Join(errs...)
}

func checkNestedCallbacks(ctx context.Context, s *transportSession, _ TransportDriver) error {
	const n = 1000
	var res callbackResult
	if err := s.conn.Call(ctx, methodCallback, callbackParams{N: n}, &res); err != nil {
		return fmt.Errorf("test.callback: %w", err)
	}
	if res.Count != n {
		return fmt.Errorf("test.callback reported %d callbacks, want %d", res.Count, n)
	}
	if got := s.host.echoes.Load(); got != n {
		return fmt.Errorf("the host served %d callbacks, want %d", got, n)
	}
	return nil
}

func checkChunkedUpload(ctx context.Context, s *transportSession, _ TransportDriver) error {
	const total, chunk = 16 << 20, protocol.MaxChunkBytes
	data := make([]byte, total)
	_, _ = rand.NewChaCha8([32]byte{'u', 'p'}).Read(data)
	for off := 0; off < total; off += chunk {
		var ack chunkAck
		in := chunkParams{Upload: "artifact-1", Offset: int64(off), Data: data[off : off+chunk]}
		if err := s.conn.Call(ctx, methodArtifactWrite, in, &ack); err != nil {
			return fmt.Errorf("chunk at %d: %w", off, err)
		}
		if ack.Bytes != int64(off+chunk) {
			return fmt.Errorf("chunk at %d acknowledged %d bytes, want %d", off, ack.Bytes, off+chunk)
		}
	}
	sum := sha256.Sum256(data)
	want := commitResult{Bytes: total, SHA256: hex.EncodeToString(sum[:])}
	var got commitResult
	if err := s.conn.Call(ctx, methodArtifactCommit, commitParams{Upload: "artifact-1", Bytes: want.Bytes, SHA256: want.SHA256}, &got); err != nil {
		return fmt.Errorf("artifact.commit: %w", err)
	}
	if got != want {
		return fmt.Errorf("artifact.commit reported %+v, want %+v", got, want)
	}
	return nil
}

func checkExtensionPush(ctx context.Context, s *transportSession, _ TransportDriver) error {
	var res pushResult
	if err := s.conn.Call(ctx, methodPush, pushParams{Value: "push-1"}, &res); err != nil {
		return fmt.Errorf("test.push: %w", err)
	}
	if res.HostAnswer != "push-1 received" {
		return fmt.Errorf("test.push relayed %q, want the host's answer %q", res.HostAnswer, "push-1 received")
	}
	s.host.mu.Lock()
	pushes := append([]string(nil), s.host.pushes...)
	s.host.mu.Unlock()
	if !reflect.DeepEqual(pushes, []string{"push-1"}) {
		return fmt.Errorf("the host received pushes %q, want [push-1]", pushes)
	}
	return nil
}

// startBlock starts test.block under its own context and returns once the
// handler runs; the call's outcome arrives on the channel.
func startBlock(ctx, callCtx context.Context, conn *jsonrpc.Conn, token string) (<-chan error, error) {
	done := make(chan error, 1)
	go func() { done <- conn.Call(callCtx, methodBlock, tokenParams{Token: token}, nil) }()
	if err := conn.Call(ctx, methodBlockStarted, tokenParams{Token: token}, nil); err != nil {
		return nil, fmt.Errorf("waiting for test.block to start: %w", err)
	}
	return done, nil
}

func checkCancellation(ctx context.Context, s *transportSession, _ TransportDriver) error {
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done, err := startBlock(ctx, callCtx, s.conn, "cancel-1")
	if err != nil {
		return err
	}
	cancel()
	// The peer answers only once released, so this returns only if the
	// canceller does not wait for an answer.
	select {
	case err = <-done:
	case <-ctx.Done():
		return errors.New("the cancelled call did not return")
	}
	if !errors.Is(err, context.Canceled) {
		return fmt.Errorf("cancelled call returned %v, want %v", err, context.Canceled)
	}
	var seen seenResult
	if err := s.conn.Call(ctx, methodCancelledSeen, tokenParams{Token: "cancel-1"}, &seen); err != nil {
		return fmt.Errorf("test.cancelled_seen: %w", err)
	}
	if !seen.Seen {
		return errors.New("the handler never saw its cancellation")
	}
	// Let the handler answer late; the answer must be dropped, and the
	// connection must go on serving.
	if err := s.conn.Call(ctx, methodRelease, tokenParams{Token: "cancel-1"}, nil); err != nil {
		return fmt.Errorf("test.release: %w", err)
	}
	for i := range 10 {
		if err := echoOnce(ctx, s.conn, 0, i); err != nil {
			return fmt.Errorf("after the cancellation: %w", err)
		}
	}
	return nil
}

func checkStrayStdout(ctx context.Context, s *transportSession, _ TransportDriver) error {
	for i := range 3 {
		if err := s.conn.Call(ctx, methodStdout, nil, nil); err != nil {
			return fmt.Errorf("test.stdout: %w", err)
		}
		if err := echoOnce(ctx, s.conn, 0, i); err != nil {
			return fmt.Errorf("after stray output: %w", err)
		}
	}
	return nil
}

// isTransportFailure says err is a broken stream and nothing the peer
// authored.
func isTransportFailure(err error) bool {
	var authored *protocol.Error
	return errors.Is(err, jsonrpc.ErrTransport) && !errors.As(err, &authored)
}

func checkCrashMidCall(ctx context.Context, s *transportSession, d TransportDriver) error {
	if err := checkHandshake(ctx, s, d); err != nil {
		return err
	}
	pending, err := startBlock(ctx, ctx, s.conn, "crash-1")
	if err != nil {
		return err
	}
	s.crashed = true
	err = s.conn.Call(ctx, methodCrash, nil, nil)
	if !isTransportFailure(err) {
		return fmt.Errorf("the call that crashed the extension returned %v, want a transport error", err)
	}
	if err := <-pending; !isTransportFailure(err) {
		return fmt.Errorf("a call pending at the crash returned %v, want a transport error", err)
	}
	for i := range 3 {
		if err := echoOnce(ctx, s.conn, 0, i); !isTransportFailure(err) {
			return fmt.Errorf("a call after the crash returned %v, want a transport error", err)
		}
	}
	_ = s.stop() // the crashed extension's exit status is no news

	restarted, err := startTransportSession(ctx, d)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	defer func() { _ = restarted.stop() }()
	if err := checkHandshake(ctx, restarted, d); err != nil {
		return fmt.Errorf("after restart: %w", err)
	}
	for i := range 10 {
		if err := echoOnce(ctx, restarted.conn, 0, i); err != nil {
			return fmt.Errorf("after restart: %w", err)
		}
	}
	return nil
}
