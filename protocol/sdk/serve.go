package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"

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
// When stdin and stdout are pipes or sockets, Serve reads and writes them
// through the runtime's poller rather than in blocking system calls, which
// spares a thread hand-off on every message.
//
// With EXTENSION_CPUPROFILE=PREFIX in its environment (CPUProfileEnv) the
// process writes its CPU profile to PREFIX.<pid> while it serves.
func Serve(ext *Extension) error {
	defer startCPUProfile()()
	out := TakeStdout()
	return ServeConn(context.Background(), pollable(os.Stdin), pollable(out), ext)
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
	taken := &unanswered{ids: map[string]int{}, changed: make(chan struct{})}
	cw := &answerWriter{w: w, answered: taken.answered}
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
		taken.take(req.ID)
		res, err := s.call(ctx, req.Seq, req.Method, json.RawMessage(req.Params))
		if req.Method == "shutdown" && err == nil {
			ackOnce.Do(func() { close(shutdownAcked) })
		}
		if afterServe != nil {
			afterServe(req.Method)
		}
		return res, err
	})
	conn = jsonrpc.NewConn(r, cw, handler, &jsonrpc.Options{
		MaxInflight: maxInflight,
		DecodeError: DecodeError,
		Logf:        s.logf,
		Eager:       eagerServing,
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
// itself (jsonrpc.Options.Eager): those whose handlers are PureFuncs, which
// get no Host and cannot call back (routes, validate and the four
// in-transaction methods). They answer from their params, so they cost no
// goroutine and no wake-up; one that blocks or runs long is handed to a
// goroutine at jsonrpc.DefaultEagerDeadline (about 1 ms in an otherwise
// idle process: see jsonrpc.Options.EagerDeadline), so it stalls the
// connection for no longer and sees $/cancel. (They were served Inline
// before: no $/cancel, and one that blocked stalled the connection for
// good.)
//
// Every other request is handed to a goroutine at once. Starting those on
// the reader too was measured (BenchmarkOperationCallEcho,
// BenchmarkServeRoundTrip demo-goroutine against demo) and gained nothing
// measurable on this machine, while a handler that blocks without calling
// back (one waiting for its cancellation, an executor starting a process)
// would hold the stream up to the deadline, delaying a $/cancel and every
// request behind it by up to a millisecond.
func servedEager(method string) bool {
	switch method {
	case "route.match", "route.samples", "validate":
		return true
	}
	mt, ok := protocol.LookupMethod(method)
	return ok && mt.InTransaction && mt.Direction == protocol.HostToExtension
}

// eagerServing is the Eager option ServeConn passes (a variable so a
// benchmark can compare it with handing every request to a goroutine, or
// with starting every request on the reader).
var eagerServing = servedEager

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
// have not been written yet, by id, so ServeConn exits only once each has
// its answer on the wire. A response the transport writes itself
// (overloaded, a refusal of malformed params) answers no request taken
// here and counts for nothing.
type unanswered struct {
	mu      sync.Mutex
	ids     map[string]int
	n       int
	changed chan struct{}
}

func (u *unanswered) take(id []byte) {
	u.mu.Lock()
	u.ids[string(id)]++
	u.n++
	u.mu.Unlock()
}

func (u *unanswered) answered(id []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ids[string(id)] == 0 {
		return
	}
	if u.ids[string(id)]--; u.ids[string(id)] == 0 {
		delete(u.ids, string(id))
	}
	u.n--
	close(u.changed)
	u.changed = make(chan struct{})
}

// pending is how many are unanswered and a channel closed on the next
// answer.
func (u *unanswered) pending() (int, <-chan struct{}) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.n, u.changed
}

// answerWriter reports the id of each response written through it. The
// transport writes one whole message per Write.
type answerWriter struct {
	w        io.Writer
	answered func(id []byte)
}

var responseHead = []byte(`{"jsonrpc":"2.0","id":`)

func (a *answerWriter) Write(b []byte) (int, error) {
	n, err := a.w.Write(b)
	if err == nil {
		if id, ok := responseID(b); ok {
			a.answered(id)
		}
	}
	return n, err
}

func (a *answerWriter) Close() error {
	if cl, ok := a.w.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

// responseID returns the id of a message the transport wrote when it is a
// response (its id is followed by result or error, not by method).
func responseID(b []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(b, responseHead)
	if !ok {
		return nil, false
	}
	end := idEnd(rest)
	if end <= 0 || bytes.HasPrefix(rest[end:], []byte(`,"method"`)) {
		return nil, false
	}
	return rest[:end], true
}

// idEnd is the length of the JSON id token at the start of b (a number,
// null or a string, escapes included), or -1.
func idEnd(b []byte) int {
	if len(b) > 0 && b[0] == '"' {
		for i := 1; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return -1
	}
	return bytes.IndexByte(b, ',')
}
