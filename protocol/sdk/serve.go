package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// Serve serves ext on the process's stdin and stdout and returns when the
// host is done with it: after shutdown, or when stdin reaches end of file
// (so a host that crashed never leaves the extension serving nobody).
// It returns an error only when ext does not match its manifest or the
// stream broke with a protocol error.
//
// Before anything else, Serve moves os.Stdout to stderr (TakeStdout), so a
// stray fmt.Println cannot corrupt the stream.
//
// Serve reads stdin in blocking system calls and writes stdout, when it
// is a pipe or a socket, through the runtime's poller. A request the
// reader serves itself (servedEager) is then read, served and answered by
// one thread with one read and one write, which is most requests: read
// through the poller, each message cost a failed read, an epoll wait and
// a second read, and waking the thread that waited (prototypes/transport's
// fullstack echo, in back-to-back runs with operation.call served on the
// reader: 56 µs of extension CPU an echo through the poller, 30 µs
// blocking). The price
// is on wake-ups: a handler the reader wakes (with the answer to its host
// call, or its $/cancel) waits for another thread to take it up while the
// reader blocks in its next read. Closing a blocking stdin does not wait
// for a read in progress, so Serve still returns at once after shutdown.
//
// With EXTENSION_CPUPROFILE=PREFIX in its environment (CPUProfileEnv) the
// process writes its CPU profile to PREFIX.<pid> while it serves.
func Serve(ext *Extension) error {
	defer startCPUProfile()()
	out := TakeStdout()
	return ServeConn(context.Background(), os.Stdin, pollable(out), ext)
}

// TakeStdout moves os.Stdout to stderr and returns the real standard
// output for the protocol: from then on os.Stdout is a file writing to the
// standard error, so a stray fmt.Println cannot corrupt the stream. Child
// processes started with os.Stdout as their output write to stderr too;
// give any other child an output of its own. A main that serves with
// ServeConn rather than Serve calls it first:
//
//	out := sdk.TakeStdout()
//	err := sdk.ServeConn(ctx, os.Stdin, out, ext)
//
// Call it once: a second call would hand out stderr.
func TakeStdout() *os.File {
	protocolOut := os.Stdout
	os.Stdout = stdoutToStderr()
	return protocolOut
}

// ServeConn serves ext over r and w, as Serve does over stdio, and returns
// when the peer closed r, after shutdown, or when ctx ends. It closes r
// and w when they are io.Closers.
func ServeConn(ctx context.Context, r io.Reader, w io.Writer, ext *Extension) error {
	taken := &unanswered{}
	// The Host calls through conn, which exists only once NewConn has
	// returned; a handler may already run by then.
	var conn *jsonrpc.Conn
	ready := make(chan struct{})
	s, err := newServer(ext, CallerFunc(func(ctx context.Context, method string, params, result any) error {
		<-ready
		return conn.Call(ctx, method, params, result)
	}))
	if err != nil {
		closeAll(r, w)
		return err
	}
	s.host.rpc = func() *jsonrpc.Conn { <-ready; return conn }
	eager := eagerServing
	if releaseOnDone && eager != nil {
		s.readerConn = func(method string, ctx context.Context) *jsonrpc.Conn {
			if !eager(method) {
				return nil
			}
			return jsonrpc.ConnFromContext(ctx)
		}
	}
	var inline func(string, json.RawMessage) bool
	if inlinePure {
		inline = s.servedInline
	}
	shutdownAcked := make(chan struct{})
	var ackOnce sync.Once
	handler := jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		if req.Notification {
			// No notification is served beyond $/cancel (handled by the
			// transport); the rest are dropped, as the protocol allows.
			s.logf("dropped notification %s", req.Method)
			return nil, nil
		}
		if beforeServe != nil {
			beforeServe(req.Method)
		}
		taken.take()
		// The request itself, as the params of the wire (wireParams).
		res, err := s.call(ctx, req.Seq, req.Method, req)
		if req.Method == "shutdown" && err == nil {
			ackOnce.Do(func() { close(shutdownAcked) })
		}
		if afterServe != nil {
			afterServe(req.Method)
		}
		return res, err
	})
	conn = jsonrpc.NewConn(r, w, handler, &jsonrpc.Options{
		ReuseParams:   reuseParams,
		MaxInflight:   maxInflight,
		DecodeError:   DecodeError,
		Logf:          s.logf,
		Inline:        inline,
		Eager:         eager,
		EagerDeadline: eagerDeadline,
		Answered:      func(*jsonrpc.Request) { taken.answered() },
	})
	close(ready)
	for {
		select {
		case <-conn.Done():
			return streamError(conn.Err())
		case <-ctx.Done():
			conn.Close()
			return ctx.Err()
		case <-shutdownAcked:
			// Exit once every request taken has been answered, the
			// shutdown acknowledgement included. Shutdown answers only
			// once every request read before it has been taken.
			shutdownAcked = nil
			go func() {
				for {
					n, ch := taken.pending()
					if n == 0 {
						conn.Close()
						return
					}
					select {
					case <-ch:
					case <-conn.Done():
						return
					}
				}
			}()
		}
	}
}

// servedEager says which requests the transport's reader starts serving
// itself (jsonrpc.Options.Eager), rather than handing each to a goroutine
// at once (an operation.call for an Operation with Pure is served Inline
// instead: server.servedInline):
//
//   - those whose handlers are PureFuncs, which get no Host and cannot
//     call back (routes, validate and the four in-transaction methods):
//     they answer from their params;
//   - operation.call, the toolbelt call: most handlers answer from their
//     input or after a host call or two. Started on the reader, one that
//     answers at once costs no goroutine and no wake-up (the full stack's
//     echo in prototypes/transport, back-to-back runs: 62 µs of extension
//     CPU an echo with a goroutine per call, 30 µs on the reader with the
//     blocking stdin above); one that calls the host hands the reading to
//     a new goroutine at its first call, and goes on as a handler of its
//     own.
//   - webhook.handle: a handler checks a signature and builds Events
//     from the body, so on the reader a delivery costs the extension no
//     goroutine and no wake-up (notes' webhook, BenchmarkWebhookNotes in
//     host/daemon); one that resolves a secret first hands the reading on
//     at that call, as operation.call does.
//
// A handler that waits for its context (or passes it to a blocking call)
// hands the reading on as it asks for Done (inflightCall.Done); one that
// blocks or runs long without looking is handed on at EagerDeadline
// (jsonrpc.DefaultEagerDeadline, which is a timer's: about 1 ms in an
// otherwise idle process). Either way it holds up the stream, a $/cancel
// sent to it and every request behind it for no longer
// (TestBlockingOperationCallNeitherStallsNorMissesCancel).
//
// Every other request is handed to a goroutine at once: executors start
// processes, tasks and checks run long, and those would hold the stream up
// to the deadline on every call for no gain.
func servedEager(method string) bool {
	switch method {
	case "route.match", "route.samples", "validate", "operation.call", "webhook.handle":
		return true
	}
	mt, ok := protocol.LookupMethod(method)
	return ok && mt.InTransaction && mt.Direction == protocol.HostToExtension
}

// inlinePure says whether ServeConn has the reader serve operation.call
// for an Operation with Pure itself (server.servedInline; a variable for
// the negative controls of the tests that show it, which then see such a
// call started Eager as a Handler's is).
var inlinePure = true

// releaseOnDone says whether the context of a handler the reader started
// passes the reading on when asked for Done (inflightCall.Done; a
// variable for the negative control of the test that shows what it is
// for).
var releaseOnDone = true

// eagerServing is the Eager option ServeConn passes (a variable so a
// benchmark can compare it with handing every request to a goroutine, or
// with starting every request on the reader).
var eagerServing = servedEager

// reuseParams is the ReuseParams option ServeConn passes: off, since
// operation.call's input aliases its request's params (serveOperationCall),
// which a handler may keep (a variable for the negative control of
// TestOperationInputsAreTheHandlersToKeep).
var reuseParams = false

// eagerDeadline is the EagerDeadline option ServeConn passes: zero, the
// transport's default (a variable so a test can show what the deadline is
// for by setting it far out).
var eagerDeadline time.Duration

// beforeServe, when set, runs as a request's handler starts: tests hold a
// handler there to start it after a later request's.
var beforeServe func(method string)

// afterServe, when set, runs as a request's handler returns, before the
// transport writes its answer: tests hold an answer there.
var afterServe func(method string)

// maxInflight is the bound on requests served at once (a variable so the
// transcript of an overload can stay short).
var maxInflight = protocol.MaxInflight

// streamError is what ServeConn returns when the connection ended: nothing
// for the end of the stream or a close, the error for a protocol error.
func streamError(err error) error {
	if errors.Is(err, jsonrpc.ErrProtocol) {
		return err
	}
	return nil
}

func closeAll(r io.Reader, w io.Writer) {
	if c, ok := r.(io.Closer); ok {
		_ = c.Close()
	}
	if c, ok := w.(io.Closer); ok {
		_ = c.Close()
	}
}

// unanswered counts the requests handed to the handler whose responses
// have not been written yet, so ServeConn exits only once each has its
// answer on the wire. The transport reports each of those answers
// (jsonrpc.Options.Answered) and none it gives itself (overloaded, a
// refusal of malformed params), which answer no request taken here. It
// costs no allocation per request: the channel that signals an answer
// exists only while someone waits on it. (It kept the taken requests by
// id, matched against the id of each response written, before the
// transport reported its answers: two map operations and a scan of every
// message written, about 1 µs of an echo's critical path in the
// extension, prototypes/transport's fullstack timeline.)
type unanswered struct {
	mu      sync.Mutex
	n       int
	changed chan struct{} // nil until pending hands it out
}

func (u *unanswered) take() {
	u.mu.Lock()
	u.n++
	u.mu.Unlock()
}

func (u *unanswered) answered() {
	u.mu.Lock()
	u.n--
	if u.changed != nil {
		close(u.changed)
		u.changed = nil
	}
	u.mu.Unlock()
}

// pending is how many are unanswered and a channel closed on the next
// answer.
func (u *unanswered) pending() (int, <-chan struct{}) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.changed == nil {
		u.changed = make(chan struct{})
	}
	return u.n, u.changed
}
