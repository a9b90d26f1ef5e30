package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	// DefaultMaxInflight is how many requests a Conn serves at once.
	DefaultMaxInflight = 64
	// DefaultMaxMessageBytes caps one line (16 MiB).
	DefaultMaxMessageBytes = 16 << 20
	// DefaultEagerDeadline is how long an Options.Eager handler runs on
	// the reader before the reading passes to a new goroutine: a few
	// round trips, so that a handler that answers from memory or one
	// quick read never pays for a goroutine, while one that blocks holds
	// the stream up for no longer than a slow round trip.
	DefaultEagerDeadline = 100 * time.Microsecond
)

// readBufferBytes is the reader's buffer: most messages fit in it whole,
// and a longer line is gathered in a separate, growing buffer.
const readBufferBytes = 256 << 10

// cancelMethod is the notification that cancels a request in flight.
const cancelMethod = "$/cancel"

// Options configure a Conn. The zero value (or nil) is ready to use.
type Options struct {
	// MaxInflight is how many requests and notifications the Conn serves
	// at once. Over it a request is answered at once with the authored
	// error overloaded (-32000, data {"code":"overloaded"}), a
	// notification is dropped and logged, and the reader goes on. Zero
	// means DefaultMaxInflight.
	MaxInflight int

	// MaxMessageBytes caps one incoming line, newline excluded. A longer
	// line is a protocol error that closes the connection. Zero means
	// DefaultMaxMessageBytes.
	MaxMessageBytes int

	// DecodeError, when set, turns an error response into the error Call
	// returns; returning nil keeps the *Error. Protocol users map the
	// wire codes onto their sentinel errors here.
	DecodeError func(code int, message string, data json.RawMessage) error

	// ReuseParams makes the Conn reuse the memory of Request.Params once
	// Handle has returned and its result has been sent, which spares an
	// allocation per request (a big one for artifact chunks). Set it only
	// when no handler keeps the raw params beyond that: returning Params,
	// or a value holding it, as the result is fine, and DecodeParams
	// copies what it decodes, but a goroutine that outlives Handle must
	// copy the bytes itself.
	ReuseParams bool

	// Inline, when set, names the requests the reader serves itself, in
	// order, instead of handing each to a new goroutine: that saves a
	// goroutine and a wake-up per request, most of a small round trip's
	// cost. It is for handlers that answer from their params or from
	// memory: while one runs the Conn reads nothing, so a handler that
	// calls back over the Conn or waits on the peer deadlocks, a slow one
	// delays every message behind it, and $/cancel cannot reach it (its
	// context still ends when the connection does). The bound on requests
	// in flight, Seq and the mapping of errors are as for any handler. The
	// peer must keep reading while it waits for the answer, as a Conn that
	// serves its own requests in goroutines does. Under ReuseParams an
	// inline handler's Params alias the read buffer.
	//
	// Inline sees each request's method and raw params (nil when it has
	// none), since whether a handler can block may depend on what the
	// params name (the SDK's operation.call names its operation there).
	// It runs on the reader for every request and notification, before
	// the bound is checked, so it must be cheap. params are one JSON value
	// that keeps the strict rule (the line was checked whole); they alias
	// the read buffer and are valid only until it returns: it must not
	// keep or modify them.
	Inline func(method string, params json.RawMessage) bool

	// Eager, when set, names the methods whose requests the reader starts
	// serving itself, like Inline, but without Inline's limits. A call the
	// handler makes with its own context (the ctx Handle got) reads the
	// stream itself while it waits, serving what comes before its answer
	// as the reader does, and gives the reading back with the answer. A
	// call with any other context, or the handler running for
	// EagerDeadline between its calls, passes the reading to a new
	// goroutine, and the handler goes on where it is, as a handler in a
	// goroutine of its own. A handler that answers at once (most do), or
	// calls back with its own context, costs no goroutine and no wake-up;
	// one that waits or runs long costs one goroutine, as before, and
	// blocks the stream for at most the deadline. Everything else is as for
	// any handler: the bound on requests in flight, $/cancel (read by the
	// handler's own call, or once the reading has passed on, and so within
	// the deadline), Seq and the mapping of errors. A request that Inline
	// names is Inline, whatever Eager says of its method. Params never
	// alias the read buffer.
	//
	// A call reading its own answer waits in the read itself, so what ends
	// it from this side (Close, or the handler returning while a goroutine
	// it started makes the call) takes effect once that read returns: at
	// once where Close interrupts a read (a pipe on the poller), on a
	// blocking stdin at the peer's next line or the end of the stream.
	Eager func(method string) bool

	// EagerDeadline is how long an Eager handler may run on the reader
	// before the reading passes on. Zero means DefaultEagerDeadline. It
	// is a timer's: in a process with nothing else to run, Go's poller
	// wakes for a timer under a millisecond only after one (it sleeps in
	// milliseconds), so a handler that blocks without calling back can
	// hold the reading for about 1 ms, and a $/cancel sent to it meanwhile
	// is read that late.
	EagerDeadline time.Duration

	// Answered, when set, is called with each request the Handler served
	// once its response has been written, or the write failed, or the
	// connection had ended first: nothing more of it reaches the peer. It
	// is not called for notifications, nor for the answers the Conn gives
	// without the Handler (overloaded, a refusal of malformed params). It
	// runs on the goroutine that wrote the response, before that goroutine
	// reads or serves anything else.
	Answered func(req *Request)

	// Logf, when set, receives what the Conn keeps on this side: the
	// detail of unauthored handler errors, dropped messages and the cause
	// of a broken stream. It may be called from any goroutine.
	Logf func(format string, args ...any)
}

// Conn is one side of a symmetric JSON-RPC 2.0 connection: either side
// calls and serves on the same stream, one JSON object per line.
//
// Concurrency: every method of Conn is safe for concurrent use. NewConn
// starts one reader goroutine, which decodes each line once and hands a
// request to a new goroutine running the Handler; it never waits for a
// handler, so responses to nested calls keep flowing while handlers run.
// The exceptions are a request Options.Inline names, which the reader
// serves itself, and one Options.Eager names, which the reader starts
// serving and hands on to a goroutine only when it runs long or calls with
// a context other than its own (then a new goroutine takes over the
// reading); its calls with its own context read their answers themselves.
// Writes are serialised: each message is encoded into a private buffer
// and written with a single Write under a mutex. The Conn owns r and w
// from NewConn on: nothing else may read r or write w.
type Conn struct {
	r       io.Reader
	w       io.Writer
	handler Handler

	maxInflight int
	maxMessage  int
	decodeError func(int, string, json.RawMessage) error
	logf        func(string, ...any)
	reuseParams bool
	inline      func(string, json.RawMessage) bool
	eager       func(string) bool
	eagerFor    time.Duration
	answered    func(*Request)

	// rd is the stream's reader state. Only the goroutine that holds the
	// reading uses it: the reader, or, after an Eager handler handed the
	// reading on, the goroutine that took it over.
	rd *lineReader
	// onReader is the Eager handler running on the reader, if any, and
	// eagerTimer hands the reading on from it at its deadline: one timer
	// per Conn, armed by the goroutine that holds the reading (a new timer
	// per request was a tenth of an Eager request's CPU).
	onReader   atomic.Pointer[eagerRun]
	eagerTimer *time.Timer
	// handoffs counts how often the reading passed on (for tests).
	handoffs atomic.Int64

	ctx    context.Context // handlers' base context; carries the Conn
	cancel context.CancelFunc

	nextID atomic.Int64
	wmu    sync.Mutex

	idle   chan task    // parked handler goroutines receive here
	parked atomic.Int32 // how many are parked

	mu       sync.Mutex
	pending  map[int64]chan reply
	inflight map[string]*requestCtx
	running  int
	served   uint64 // requests handed to the handler: the last Request.Seq
	err      error
	done     chan struct{}

	closeR, closeW sync.Once
	closeWErr      error
	// writeFailed arms the end of a connection whose write failed, once
	// (see write).
	writeFailed sync.Once
}

// reply is the outcome of one outgoing call.
type reply struct {
	result []byte
	err    *wireError
	// notStrict, when set, says how the response broke the strict JSON
	// rule; the call fails with ErrInvalidResponse.
	notStrict string
}

type connKey struct{}

// ConnFromContext returns the Conn serving the request whose handler got
// ctx, or nil.
func ConnFromContext(ctx context.Context) *Conn {
	c, _ := ctx.Value(connKey{}).(*Conn)
	return c
}

// NewConn starts a connection reading messages from r and writing them to
// w, serving incoming requests with h (nil answers every request with
// -32601). When the connection ends, r and w are closed if they implement
// io.Closer.
func NewConn(r io.Reader, w io.Writer, h Handler, opts *Options) *Conn {
	if opts == nil {
		opts = &Options{}
	}
	c := &Conn{
		r:           r,
		w:           w,
		handler:     h,
		maxInflight: opts.MaxInflight,
		maxMessage:  opts.MaxMessageBytes,
		decodeError: opts.DecodeError,
		logf:        opts.Logf,
		reuseParams: opts.ReuseParams,
		inline:      opts.Inline,
		eager:       opts.Eager,
		eagerFor:    opts.EagerDeadline,
		answered:    opts.Answered,
		pending:     map[int64]chan reply{},
		inflight:    map[string]*requestCtx{},
		done:        make(chan struct{}),
		idle:        make(chan task),
	}
	if c.maxInflight <= 0 {
		c.maxInflight = DefaultMaxInflight
	}
	if c.maxMessage <= 0 {
		c.maxMessage = DefaultMaxMessageBytes
	}
	if c.eagerFor <= 0 {
		c.eagerFor = DefaultEagerDeadline
	}
	c.rd = &lineReader{br: bufio.NewReaderSize(r, readBufferBytes)}
	if c.eager != nil {
		c.eagerTimer = time.AfterFunc(time.Hour, func() {
			if run := c.onReader.Load(); run != nil {
				c.handOff(run)
			}
		})
		c.eagerTimer.Stop()
	}
	if c.handler == nil {
		c.handler = Methods(nil)
	}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	c.ctx, c.cancel = context.WithCancel(context.WithValue(context.Background(), connKey{}, c))
	go c.readLoop()
	return c
}

// Done is closed when the connection has ended; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Served is the Seq of the last request the Conn has handed its Handler,
// 0 before any: a request read from the stream before a given moment has
// a Seq of at most Served at that moment, however late its handler starts.
func (c *Conn) Served() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.served
}

// Err returns nil while the connection is up and afterwards the error,
// wrapping ErrTransport, that every call now fails with.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection: pending and later calls fail with an error
// wrapping ErrTransport, handlers' contexts are cancelled, and r and w are
// closed when they are io.Closers. It returns the error of closing w. A
// connection that ended by itself (Done) has closed r and w already, or is
// about to; Close is still the way to release a write stuck on a peer that
// does not read. Close may be called more than once.
func (c *Conn) Close() error {
	c.fail(fmt.Errorf("%w: connection closed", ErrTransport), nil)
	c.closeWriter()
	return c.closeWErr
}

// Call sends a request and waits for its response. params may be nil, a
// value encoding/json encodes as an object or array, or a json.RawMessage
// holding one, which is sent as it is. The result is decoded into result
// as Request.DecodeParams decodes params; a nil result discards it and a
// *json.RawMessage receives the raw bytes.
//
// When ctx ends first, Call sends $/cancel for the request, returns
// ctx.Err() at once and drops the response if one arrives later. When the
// stream breaks, it returns an error wrapping ErrTransport. An error
// response is returned as an *Error, or as what Options.DecodeError makes
// of it. Call may block in Write while the peer does not read; Close
// unblocks it. Called by an Options.Eager handler with its own context,
// Call reads the stream itself until its answer comes (see Options.Eager).
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id := c.nextID.Add(1)
	buf := getBuffer()
	defer putBuffer(buf)
	b, err := appendMessage((*buf)[:0], id, false, method, params)
	*buf = b
	if err != nil {
		return fmt.Errorf("jsonrpc: encoding params of %s: %w", method, err)
	}
	if err := c.checkSize(method, b); err != nil {
		return err
	}
	ch := make(chan reply, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.pending[id] = ch
	c.mu.Unlock()

	// An Eager handler calling with its own context reads the answer
	// itself; any other call needs the reader, which an Eager handler
	// may hold (registered first: see giveReadingBack).
	own := c.takeReadingFor(ctx)
	if own == nil {
		c.ReleaseReader()
	}
	if err := c.write(b); err != nil {
		c.forget(id)
		if own != nil {
			c.giveReadingBack(own)
		}
		return err
	}
	if own != nil {
		return c.readOwnAnswer(own, ctx.(*requestCtx), id, ch, method, result)
	}
	select {
	case r := <-ch:
		return c.finish(method, r, result)
	case <-ctx.Done():
		c.forget(id)
		go c.sendCancel(id)
		return ctx.Err()
	case <-c.done:
		// A response that raced the end still counts.
		select {
		case r := <-ch:
			return c.finish(method, r, result)
		default:
			return c.Err()
		}
	}
}

// takeReadingFor takes the reading for a call made with ctx when ctx is
// the own context of an Eager handler that holds the reading, and returns
// that handler's run; otherwise it returns nil.
//
// Such a call reads the stream itself until its answer comes
// (readOwnAnswer) rather than handing the reading to a new goroutine and
// waiting for that one to hand each answer over (a wake-up of the caller,
// and of a thread for it, on every call's round trip). Only a handler's
// own context qualifies: it
// ends only by what the reading sees (a $/cancel for the request, the end
// of the stream) or by the connection's end, so a call blocked in a read
// misses nothing it must return for; a derived context may end by its
// own timer, which a goroutine blocked in a read could not honour at once.
func (c *Conn) takeReadingFor(ctx context.Context) *eagerRun {
	rc, ok := ctx.(*requestCtx)
	if !ok || rc.conn != c || rc.eager == nil {
		return nil
	}
	if !rc.eager.state.CompareAndSwap(eagerOnReader, eagerInCall) {
		return nil
	}
	return rc.eager
}

// readOwnAnswer reads and dispatches lines, as the reader does, until the
// answer to the call id arrives on ch, or ctx ends ($/cancel for the
// handler's request, read here, or the connection's end), or the stream
// does. run's handler holds the reading, taken by takeReadingFor.
func (c *Conn) readOwnAnswer(run *eagerRun, ctx *requestCtx, id int64, ch chan reply, method string, result any) error {
	c.rd.ownAnswer = ch
	for {
		select {
		case r := <-ch:
			c.rd.ownAnswer = nil
			c.giveReadingBack(run)
			return c.finish(method, r, result)
		default:
		}
		if err := ctx.Err(); err != nil {
			c.rd.ownAnswer = nil
			c.forget(id)
			c.giveReadingBack(run)
			go c.sendCancel(id)
			return err
		}
		if !c.readLine() {
			// The connection ended: nobody reads on.
			run.state.Store(eagerHandedOff)
			select {
			case r := <-ch:
				return c.finish(method, r, result)
			default:
				return c.Err()
			}
		}
	}
}

// giveReadingBack ends a call's own reading: the handler holds the reading
// again, between its calls, under a fresh deadline. The reading passes to
// a new goroutine instead when another call waits for an answer (it
// registered before trying to release the reader, so either it is seen
// here or its release comes after this and succeeds), or when the handler
// returned while the call read (a goroutine of its own made the call).
func (c *Conn) giveReadingBack(run *eagerRun) {
	if !run.state.CompareAndSwap(eagerInCall, eagerOnReader) {
		if run.state.CompareAndSwap(eagerReturnedInCall, eagerHandedOff) {
			c.startReader(run)
		}
		return
	}
	c.mu.Lock()
	waiting := len(c.pending) > 0
	c.mu.Unlock()
	if waiting {
		c.handOff(run)
		return
	}
	c.eagerTimer.Reset(c.eagerFor)
}

// Notify sends a notification: no id, no answer. It fails only when the
// params do not encode or the stream is broken.
func (c *Conn) Notify(ctx context.Context, method string, params any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	buf := getBuffer()
	defer putBuffer(buf)
	b, err := appendMessage((*buf)[:0], 0, true, method, params)
	*buf = b
	if err != nil {
		return fmt.Errorf("jsonrpc: encoding params of %s: %w", method, err)
	}
	if err := c.checkSize(method, b); err != nil {
		return err
	}
	if err := c.Err(); err != nil {
		return err
	}
	return c.write(b)
}

// checkSize refuses an encoded message (newline included) that the peer
// would have to refuse, closing the connection, had it the same bound.
func (c *Conn) checkSize(method string, b []byte) error {
	if len(b)-1 > c.maxMessage {
		return fmt.Errorf("%w: %s: %d bytes, over the bound of %d", ErrTooLarge, method, len(b)-1, c.maxMessage)
	}
	return nil
}

func appendMessage(buf []byte, id int64, notification bool, method string, params any) ([]byte, error) {
	buf = appendRequestHead(buf, id, notification, method)
	if params != nil {
		buf = append(buf, `,"params":`...)
		start := len(buf)
		var err error
		if buf, err = appendValue(buf, params); err != nil {
			return buf, err
		}
		// JSON-RPC 2.0 params are structured; the peer would refuse others.
		if c := buf[start]; c != '{' && c != '[' && string(buf[start:]) != "null" {
			return buf, errors.New("params must encode as a JSON object or array")
		}
	}
	return append(buf, "}\n"...), nil
}

func (c *Conn) finish(method string, r reply, result any) error {
	if r.notStrict != "" {
		return fmt.Errorf("%w to %s: %s", ErrInvalidResponse, method, r.notStrict)
	}
	if r.err != nil {
		if c.decodeError != nil {
			if err := c.decodeError(r.err.Code, r.err.Message, r.err.Data); err != nil {
				return err
			}
		}
		return &Error{Code: r.err.Code, Message: r.err.Message, Data: r.err.Data}
	}
	switch res := result.(type) {
	case nil:
		return nil
	case *json.RawMessage:
		*res = r.result
		return nil
	}
	if err := unmarshal(r.result, result); err != nil {
		return fmt.Errorf("jsonrpc: decoding result of %s: %w", method, err)
	}
	return nil
}

func (c *Conn) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Conn) sendCancel(id int64) {
	var buf []byte
	buf = appendRequestHead(buf, 0, true, cancelMethod)
	buf = append(buf, `,"params":{"id":`...)
	buf = strconv.AppendInt(buf, id, 10)
	buf = append(buf, "}}\n"...)
	if c.Err() == nil {
		_ = c.write(buf) // a broken stream has failed the call anyway
	}
}

// WriteFailDrain bounds how long a connection whose write failed goes on
// reading before it ends.
const WriteFailDrain = time.Second

// write sends one encoded message. A failure ends the connection, but not
// at once: a peer that closed its input (a package exiting once it
// answered shutdown) may have written answers still unread, and those
// count. So the reader runs on to the end of the stream, which ends the
// connection as it always does, or for WriteFailDrain at most; the write's
// own caller gets the failure now.
func (c *Conn) write(b []byte) error {
	c.wmu.Lock()
	_, err := c.w.Write(b)
	c.wmu.Unlock()
	if err != nil {
		err = fmt.Errorf("%w: write: %v", ErrTransport, err)
		c.writeFailed.Do(func() {
			c.logf("jsonrpc: %v; reading on for what the peer sent before", err)
			time.AfterFunc(WriteFailDrain, func() { c.fail(err, nil) })
		})
		return err
	}
	return nil
}

// fail ends the connection with cause, which wraps ErrTransport; only the
// first cause counts. farewell, when set, is a last message written on a
// best-effort basis before w is closed.
func (c *Conn) fail(cause error, farewell []byte) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = cause
	c.pending = nil
	c.mu.Unlock()
	close(c.done)
	c.cancel()
	c.logf("jsonrpc: connection ended: %v", cause)
	c.closeR.Do(func() {
		if cl, ok := c.r.(io.Closer); ok {
			_ = cl.Close()
		}
	})
	if farewell == nil {
		c.closeWriter()
		return
	}
	go func() {
		// This waits behind a write in progress; if that write is stuck
		// on a peer that does not read, Close closes w and frees both.
		c.wmu.Lock()
		_, _ = c.w.Write(farewell)
		c.wmu.Unlock()
		c.closeWriter()
	}()
}

func (c *Conn) closeWriter() {
	c.closeW.Do(func() {
		if cl, ok := c.w.(io.Closer); ok {
			c.closeWErr = cl.Close()
		}
	})
}

// lineReader is the reading state that passes from goroutine to
// goroutine with the reading.
type lineReader struct {
	br   *bufio.Reader
	long []byte // gathers a line longer than br's buffer
	// answered says that a line read since the last read from the stream
	// was an answer handed to a waiting call. Before its next read from
	// the stream the reader then yields, so that the caller it woke runs
	// on this thread first: a read that blocks in the system call (an
	// extension's stdin, as sdk.Serve and ext-jsonrpc read it) keeps the
	// reader's thread and its scheduler slot, with the woken caller queued
	// on it, and the caller would wait for another thread to be woken to
	// take it, a futex wake-up on the round trip of every call made from
	// a handler.
	answered bool
	// ownAnswer, while a call reads its own answer (readOwnAnswer), is
	// where that answer arrives. No Eager handler is started on the
	// reader meanwhile (it would hold up the answer): they get goroutines.
	ownAnswer chan reply
}

// readLoop reads and dispatches lines until the stream ends or breaks, or
// until an Eager handler it ran has handed the reading on.
func (c *Conn) readLoop() {
	for c.readLine() {
	}
}

// readLine reads and dispatches one line. It returns false once the
// connection ended or the reading has passed to another goroutine.
func (c *Conn) readLine() bool {
	rd := c.rd
	if rd.answered && rd.br.Buffered() == 0 {
		rd.answered = false
		runtime.Gosched() // see lineReader.answered
	}
	line, err := rd.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		rd.long = append(rd.long[:0], line...)
		for err == bufio.ErrBufferFull && len(rd.long) <= c.maxMessage {
			line, err = rd.br.ReadSlice('\n')
			rd.long = append(rd.long, line...)
		}
		line = rd.long
	}
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if len(line) > c.maxMessage {
		c.protocolError(nil, CodeParseError, "message too long",
			fmt.Errorf("%w: %w: a line exceeds %d bytes", ErrTransport, ErrProtocol, c.maxMessage))
		return false
	}
	if len(bytes.TrimSpace(line)) > 0 {
		if !c.dispatch(line) {
			return false
		}
	}
	if cap(rd.long) > 4*readBufferBytes {
		rd.long = nil // do not pin a huge buffer after a rare long line
	}
	if err != nil {
		if err == io.EOF {
			c.fail(fmt.Errorf("%w: end of stream", ErrTransport), nil)
		} else {
			c.fail(fmt.Errorf("%w: read: %v", ErrTransport, err), nil)
		}
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// protocolError answers a malformed line and closes the connection.
func (c *Conn) protocolError(id []byte, code int, message string, cause error) {
	farewell := appendErrorResponse(nil, id, &wireError{Code: code, Message: message})
	c.fail(cause, farewell)
}

// dispatch handles one line; it returns false once the connection ended
// or the reading has passed to another goroutine.
func (c *Conn) dispatch(line []byte) bool {
	m, err := parseMessage(line)
	if err != nil {
		if errors.Is(err, errSyntax) || errors.Is(err, errTooDeep) {
			c.protocolError(nil, CodeParseError, "parse error",
				fmt.Errorf("%w: %w: %v", ErrTransport, ErrProtocol, err))
		} else {
			var id []byte
			if m.id != nil && (m.id[0] == '"' || m.id[0] == '-' || (m.id[0] >= '0' && m.id[0] <= '9')) {
				id = m.id // a readable id is echoed so the peer can match it
			}
			c.protocolError(id, CodeInvalidRequest, "invalid request: "+err.Error(),
				fmt.Errorf("%w: %w: %v", ErrTransport, ErrProtocol, err))
		}
		return false
	}
	if !m.hasMethod {
		c.deliver(m)
		return true
	}
	if m.notStrict != "" {
		c.refuseNotStrict(m)
		return true
	}
	if m.id == nil && m.method == cancelMethod {
		c.cancelInflight(m.params)
		return true
	}
	return c.serve(m)
}

// refuseNotStrict answers a request that breaks the strict JSON rule with
// invalid params, and drops such a notification; no handler sees either.
// The reader goes straight on.
func (c *Conn) refuseNotStrict(m inMessage) {
	if m.id == nil {
		c.logf("jsonrpc: dropped a notification: %s", m.notStrict)
		return
	}
	c.logf("jsonrpc: refused request %s: %s", m.id, m.notStrict)
	go c.writeError(bytes.Clone(m.id), &wireError{Code: CodeInvalidParams, Message: "invalid params: " + m.notStrict})
}

// deliver hands a response to the call waiting for it; one nobody waits
// for (a call that was cancelled) is dropped.
func (c *Conn) deliver(m inMessage) {
	id, err := strconv.ParseInt(string(m.id), 10, 64)
	if err != nil {
		c.logf("jsonrpc: dropped a response with foreign id %s", m.id)
		return
	}
	c.mu.Lock()
	ch := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ch == nil {
		c.logf("jsonrpc: dropped a response to %d, which nobody awaits", id)
		return
	}
	var r reply
	switch {
	case m.notStrict != "":
		r.notStrict = m.notStrict
	case m.errObj != nil:
		var we wireError
		if err := json.Unmarshal(m.errObj, &we); err != nil {
			we = wireError{Code: CodeInternal, Message: "malformed error response"}
		}
		r.err = &we
	default:
		r.result = bytes.Clone(m.result)
	}
	ch <- r // buffered: never blocks the reader
	if ch != c.rd.ownAnswer {
		c.rd.answered = true
	}
}

func (c *Conn) cancelInflight(params []byte) {
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.ID) == 0 {
		c.logf("jsonrpc: ignored a malformed $/cancel: %s", params)
		return
	}
	c.mu.Lock()
	rc := c.inflight[string(p.ID)]
	c.mu.Unlock()
	if rc != nil {
		rc.cancel()
	}
}

// serve starts a handler for a request or notification. Over the bound, a
// request is refused with overloaded and a notification dropped; either
// way the reader goes straight on. It returns false when the connection
// ended or an Eager handler handed the reading on.
func (c *Conn) serve(m inMessage) bool {
	// A value until it is known what holds it (servedRequest, or a
	// Request of its own for an Inline method).
	req := Request{Method: m.method, Notification: m.id == nil}
	var id []byte
	if m.id != nil {
		id = bytes.Clone(m.id)
		req.ID = id
	}
	key := string(id)
	// Decided outside the lock: the predicate may read the params.
	inline := c.inline != nil && c.inline(m.method, m.params)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return false
	}
	if c.running >= c.maxInflight {
		c.mu.Unlock()
		if req.Notification {
			c.logf("jsonrpc: dropped notification %s: %d handlers in flight", m.method, c.maxInflight)
			return true
		}
		go c.writeError(id, overloaded)
		return true
	}
	if !req.Notification {
		if _, dup := c.inflight[key]; dup {
			c.mu.Unlock()
			go c.writeError(id, &wireError{Code: CodeInvalidRequest, Message: "invalid request: id already in flight"})
			return true
		}
	}
	if inline {
		if !req.Notification {
			c.served++
			req.Seq = c.served
		}
		c.mu.Unlock()
		inlineReq := req
		c.serveInline(m, &inlineReq)
		return true
	}
	// The request, its context and its Eager run in one allocation.
	sv := &servedRequest{req: req}
	rc := &sv.ctx
	rc.conn = c
	c.running++
	if !req.Notification {
		c.inflight[key] = rc
		c.served++
		sv.req.Seq = c.served
	}
	c.mu.Unlock()
	switch {
	case m.params == nil:
	case c.reuseParams:
		sv.req.buf = paramsPool.Get().(*[]byte)
		sv.req.Params = append((*sv.req.buf)[:0], m.params...)
	default:
		sv.req.Params = bytes.Clone(m.params)
	}
	t := task{ctx: rc, id: id, req: &sv.req}
	if c.eager != nil && c.rd.ownAnswer == nil && c.eager(m.method) {
		return c.serveEager(t, &sv.run)
	}
	c.dispatchTask(t)
	return true
}

// eagerRun is one Eager handler started on the reader; state says who
// holds the reading.
type eagerRun struct{ state atomic.Int32 }

// servedRequest is what serve allocates for a request it hands to a
// handler not Inline, at once: the Request, its context and, when it is
// started on the reader, its eagerRun (three allocations before).
type servedRequest struct {
	req Request
	ctx requestCtx
	run eagerRun
}

const (
	eagerOnReader       = iota // the handler runs on the reader, which waits for it
	eagerHandedOff             // the reading passed to a new goroutine
	eagerReturned              // the handler returned first: the reader reads on
	eagerInCall                // a call with the handler's context reads its own answer
	eagerReturnedInCall        // the handler returned during that call, which passes the reading on
)

// serveEager runs t on the reader (serve has copied its params, so they
// do not alias the read buffer, which the next reader may overwrite). It
// returns whether this goroutine still holds the reading.
func (c *Conn) serveEager(t task, run *eagerRun) bool {
	// This store orders every use of the read state above before the
	// handoff's compare-and-swap, which may start the next reader.
	run.state.Store(eagerOnReader)
	t.ctx.eager = run
	c.onReader.Store(run)
	c.eagerTimer.Reset(c.eagerFor)
	c.run(t.ctx, t.id, t.req)
	for {
		switch run.state.Load() {
		case eagerOnReader:
			if run.state.CompareAndSwap(eagerOnReader, eagerReturned) {
				c.eagerTimer.Stop()
				c.onReader.CompareAndSwap(run, nil)
				return true
			}
		case eagerInCall:
			// A goroutine the handler started is in a call with its
			// context, reading: that call passes the reading on.
			if run.state.CompareAndSwap(eagerInCall, eagerReturnedInCall) {
				return false
			}
		default:
			// Handed on: the timer and onReader belong to the new reader now.
			return false
		}
	}
}

// handOff passes the reading on from the Eager handler run, unless it
// returned or handed it on already.
func (c *Conn) handOff(run *eagerRun) {
	if run.state.CompareAndSwap(eagerOnReader, eagerHandedOff) {
		c.startReader(run)
	}
}

// startReader starts a new reader in place of run's handler, which no
// longer holds the reading.
func (c *Conn) startReader(run *eagerRun) {
	// Disarmed before the next reader exists, which may arm it again
	// (a no-op when the timer is what called).
	c.eagerTimer.Stop()
	c.onReader.CompareAndSwap(run, nil)
	c.handoffs.Add(1)
	go c.readLoop()
}

// ReleaseReader passes the reading on when an Eager handler holds it
// (Options.Eager), as a call over the Conn does, and does nothing
// otherwise. A handler about to wait calls it so that the messages behind
// it, a $/cancel for it included, are read at once rather than at the
// EagerDeadline, which a timer honours only to about a millisecond in an
// idle process. (The SDK calls it when an Eager handler asks for its
// context's Done channel.)
func (c *Conn) ReleaseReader() {
	if run := c.onReader.Load(); run != nil {
		c.handOff(run)
	}
}

// task is one request handed to a handler goroutine.
type task struct {
	ctx *requestCtx
	id  []byte
	req *Request
}

// maxIdleHandlers bounds the handler goroutines a Conn keeps parked for
// the next request. A new goroutine starts with a small stack that every
// request grows again (a tenth of a small request's CPU in a profile); a
// parked one has grown it already. (A variable for the benchmark that
// compares it with none parked.)
var maxIdleHandlers int32 = 8

// dispatchTask hands t to a parked handler goroutine, or starts one.
func (c *Conn) dispatchTask(t task) {
	select {
	case c.idle <- t:
	default:
		go c.handlerLoop(t)
	}
}

// handlerLoop runs t, then parks for the next task while fewer than
// maxIdleHandlers are parked, until the connection ends.
func (c *Conn) handlerLoop(t task) {
	for {
		c.run(t.ctx, t.id, t.req)
		if c.parked.Add(1) > maxIdleHandlers {
			c.parked.Add(-1)
			return
		}
		select {
		case t = <-c.idle:
			c.parked.Add(-1)
		case <-c.done:
			c.parked.Add(-1)
			return
		}
	}
}

// serveInline runs the handler of an Options.Inline method on the reader
// goroutine and writes its answer before the next line is read. No $/cancel
// can be read meanwhile, so it needs no cancel of its own: the Conn's
// context, which ends with the connection, is the handler's.
func (c *Conn) serveInline(m inMessage, req *Request) {
	switch {
	case m.params == nil:
	case c.reuseParams:
		req.Params = m.params // the line stays put until the answer is out
	default:
		req.Params = bytes.Clone(m.params)
	}
	result, err := c.call(c.ctx, req)
	if req.Notification {
		if err != nil {
			c.logf("jsonrpc: notification %s: %v", req.Method, err)
		}
		return
	}
	c.answer(req, result, err, false)
}

var overloaded = &wireError{Code: CodeAuthored, Message: "overloaded", Data: json.RawMessage(`{"code":"overloaded"}`)}

func (c *Conn) run(ctx *requestCtx, id []byte, req *Request) {
	defer releaseParams(req)
	result, err := c.call(ctx, req)
	c.mu.Lock()
	c.running--
	if !req.Notification {
		delete(c.inflight, string(id))
	}
	c.mu.Unlock()
	cancelled := ctx.Err() != nil
	ctx.cancel()
	if req.Notification {
		if err != nil {
			c.logf("jsonrpc: notification %s: %v", req.Method, err)
		}
		return
	}
	c.answer(req, result, err, cancelled)
}

// answer writes the response to req: its result, or the wire form of err.
func (c *Conn) answer(req *Request, result any, err error, cancelled bool) {
	if c.answered != nil {
		defer c.answered(req)
	}
	if c.Err() != nil {
		return
	}
	id := req.ID
	if err != nil {
		c.writeError(id, c.wireErrorOf(req.Method, err, cancelled))
		return
	}
	buf := getBuffer()
	defer putBuffer(buf)
	b := appendResponseHead((*buf)[:0], id)
	b = append(b, `,"result":`...)
	b, encErr := appendValue(b, result)
	*buf = b
	if encErr != nil {
		c.logf("jsonrpc: %s: encoding result: %v", req.Method, encErr)
		c.writeError(id, &wireError{Code: CodeInternal, Message: "internal error"})
		return
	}
	*buf = append(b, "}\n"...)
	if err := c.checkSize(req.Method, *buf); err != nil {
		c.logf("jsonrpc: %s: result: %v", req.Method, err)
		c.writeError(id, &wireError{Code: CodeInternal, Message: "internal error"})
		return
	}
	_ = c.write(*buf)
}

// call runs the handler, turning a panic into an unauthored error.
func (c *Conn) call(ctx context.Context, req *Request) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			result, err = nil, fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return c.handler.Handle(ctx, req)
}

// wireErrorOf maps a handler's error onto the error it crosses as.
func (c *Conn) wireErrorOf(method string, err error, cancelled bool) *wireError {
	var ae AuthoredError
	if errors.As(err, &ae) {
		msg, data := ae.WireData()
		we := &wireError{Code: ae.WireNumber(), Message: msg}
		if data != nil {
			raw, mErr := appendValue(nil, data)
			if mErr != nil {
				c.logf("jsonrpc: %s: encoding error data: %v", method, mErr)
				return &wireError{Code: CodeInternal, Message: "internal error"}
			}
			we.Data = raw
		}
		return we
	}
	switch {
	case errors.Is(err, ErrInvalidParams):
		return &wireError{Code: CodeInvalidParams, Message: err.Error()}
	case errors.Is(err, ErrMethodNotFound):
		return &wireError{Code: CodeMethodNotFound, Message: err.Error()}
	case cancelled:
		return &wireError{Code: CodeCancelled, Message: "request cancelled"}
	}
	c.logf("jsonrpc: %s: %v", method, err)
	return &wireError{Code: CodeInternal, Message: "internal error"}
}

func (c *Conn) writeError(id []byte, e *wireError) {
	buf := getBuffer()
	defer putBuffer(buf)
	*buf = appendErrorResponse((*buf)[:0], id, e)
	_ = c.write(*buf)
}

// paramsPool holds the memory of received params between requests under
// Options.ReuseParams: big ones (base64 chunks) would otherwise cost an
// allocation, a sweep and page faults each.
var paramsPool = sync.Pool{New: func() any { return new([]byte) }}

// releaseParams returns req.Params' memory once the handler is done with it.
func releaseParams(req *Request) {
	if req.buf == nil {
		return
	}
	if cap(req.Params) <= 1<<20 {
		*req.buf = req.Params[:0]
		paramsPool.Put(req.buf)
	}
	req.Params, req.buf = nil, nil
}

// Buffers for encoding outgoing messages; big ones are not kept.
var bufferPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getBuffer() *[]byte { return bufferPool.Get().(*[]byte) }

func putBuffer(b *[]byte) {
	if cap(*b) <= 1<<20 {
		bufferPool.Put(b)
	}
}
