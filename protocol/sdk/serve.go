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
func Serve(ext *Extension) error {
	return ServeConn(context.Background(), os.Stdin, TakeStdout(), ext)
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
	cw := &countingWriter{w: w, changed: make(chan struct{})}
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
	var served countingInt
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
		served.add()
		res, err := s.call(ctx, req.Seq, req.Method, json.RawMessage(req.Params))
		if req.Method == "shutdown" && err == nil {
			ackOnce.Do(func() { close(shutdownAcked) })
		}
		return res, err
	})
	conn = jsonrpc.NewConn(r, cw, handler, &jsonrpc.Options{
		MaxInflight: maxInflight,
		DecodeError: DecodeError,
		Logf:        s.logf,
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
			// shutdown acknowledgement included.
			shutdownAcked = nil
			go func() {
				for {
					ch := cw.wait()
					if cw.responses() >= served.get() {
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

// beforeServe, when set, runs as a request's handler starts: tests hold a
// handler there to start it after a later request's.
var beforeServe func(method string)

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

type countingInt struct {
	mu sync.Mutex
	n  int
}

func (c *countingInt) add() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *countingInt) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// countingWriter counts the responses written through it, so ServeConn
// knows when every request it took has been answered. The transport
// writes one whole message per Write.
type countingWriter struct {
	w       io.Writer
	mu      sync.Mutex
	n       int
	changed chan struct{}
}

var responseHead = []byte(`{"jsonrpc":"2.0","id":`)

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	if err == nil && isResponse(b) {
		c.mu.Lock()
		c.n++
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
	}
	return n, err
}

func (c *countingWriter) Close() error {
	if cl, ok := c.w.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

func (c *countingWriter) wait() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

func (c *countingWriter) responses() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// isResponse reports whether a message the transport wrote is a response
// (its id is followed by result or error, not by method).
func isResponse(b []byte) bool {
	rest, ok := bytes.CutPrefix(b, responseHead)
	if !ok {
		return false
	}
	i := bytes.IndexByte(rest, ',')
	return i >= 0 && !bytes.HasPrefix(rest[i:], []byte(`,"method"`))
}
