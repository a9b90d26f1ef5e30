//go:build unix

package invoke

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// chunkBytes bounds one read of an output stream; a read asks for at most
// the stream's remaining allowance plus one byte, so the first excess
// byte is seen without reading past it.
const chunkBytes = 32 << 10

// killGroup signals a process group; a variable so a test can make it
// fail.
var killGroup = func(pgid int, sig syscall.Signal) error { return syscall.Kill(-pgid, sig) }

// session is one process of an invocation and the host's side of its
// pipes.
type session struct {
	lim    Limits
	cmd    *exec.Cmd
	pgid   int
	stdin  *os.File
	stdout *os.File
	stderr *os.File

	exited  chan struct{} // closed once the process is reaped
	waitErr error

	// What the stdout reader has framed: complete lines, in order.
	mu         sync.Mutex
	lines      [][]byte
	stdoutEOF  bool
	lineReady  chan struct{} // signalled (capacity 1) when lines or stdoutEOF change
	stdoutDone chan struct{} // closed when the stdout reader returns
	stderrDone chan struct{}
	stdoutN    atomic.Int64
	stderrN    atomic.Int64

	abortOnce sync.Once
	aborted   chan struct{}
	abortErr  *Error
}

// start launches the process: its environment exactly env, in work, in a
// new session and process group, with no descriptor but its three pipes.
func start(p *plan, env []string, work string, lim Limits) (*session, *Error) {
	s := &session{lim: lim, exited: make(chan struct{}), lineReady: make(chan struct{}, 1),
		stdoutDone: make(chan struct{}), stderrDone: make(chan struct{}), aborted: make(chan struct{})}
	var files []*os.File
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll()
		return nil, newError(CodePrerequisiteMissing, "the pipes of the process could not be made")
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Dir = work
	cmd.Env = append([]string{}, env...) // never nil: nil would pass the caller's environment
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := closeInheritedOnExec(); err != nil {
		closeAll()
		return nil, newError(CodePrerequisiteMissing, "the host's descriptors could not be listed to keep them from the process")
	}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, newError(CodePrerequisiteMissing, "the process could not be started")
	}
	inR.Close()
	outW.Close()
	errW.Close()
	s.cmd, s.pgid, s.stdin, s.stdout, s.stderr = cmd, cmd.Process.Pid, inW, outR, errR
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	go s.readStdout()
	go s.readStderr()
	return s, nil
}

// abort ends the exchange with e unless it has ended already: the first
// cause wins. A write blocked on a process that does not read returns at
// once.
func (s *session) abort(e *Error) {
	s.abortOnce.Do(func() {
		s.abortErr = e
		close(s.aborted)
		_ = s.stdin.SetWriteDeadline(time.Unix(1, 0))
	})
}

func sizeLimit(stream Stream) *Error {
	e := newError(CodeSizeLimit, "the extension wrote more on "+string(stream)+" than its limit allows")
	e.Stream = stream
	return e
}

// readStdout counts stdout against its limit and frames it into lines.
// Past the limit, or once the exchange is over, it goes on reading to the
// end of the stream (so cleanup sees whether anything still holds it) but
// keeps nothing.
func (s *session) readStdout() {
	defer close(s.stdoutDone)
	buf := make([]byte, chunkBytes)
	var line []byte
	over := false
	for {
		want := int64(len(buf))
		if !over {
			want = min(want, s.lim.MaxStdoutBytes-s.stdoutN.Load()+1)
		}
		n, err := s.stdout.Read(buf[:want])
		if n > 0 && !over {
			if s.stdoutN.Add(int64(n)) > s.lim.MaxStdoutBytes {
				over = true
				line = nil
				s.abort(sizeLimit(StreamStdout))
			} else {
				line = s.frame(line, buf[:n])
			}
		}
		if err != nil {
			s.mu.Lock()
			if len(line) > 0 && !over {
				s.lines = append(s.lines, line)
			}
			s.stdoutEOF = true
			s.mu.Unlock()
			s.signal()
			return
		}
	}
}

// frame appends chunk to the partial line and queues every line it
// completes.
func (s *session) frame(line, chunk []byte) []byte {
	queued := false
	for {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			break
		}
		full := append(line, chunk[:i]...)
		line, chunk = nil, chunk[i+1:]
		s.mu.Lock()
		s.lines = append(s.lines, full)
		s.mu.Unlock()
		queued = true
	}
	if queued {
		s.signal()
	}
	return append(line, chunk...)
}

func (s *session) signal() {
	select {
	case s.lineReady <- struct{}{}:
	default:
	}
}

// readStderr counts stderr against its limit and discards it.
func (s *session) readStderr() {
	defer close(s.stderrDone)
	buf := make([]byte, chunkBytes)
	over := false
	for {
		want := int64(len(buf))
		if !over {
			want = min(want, s.lim.MaxStderrBytes-s.stderrN.Load()+1)
		}
		n, err := s.stderr.Read(buf[:want])
		if n > 0 && !over && s.stderrN.Add(int64(n)) > s.lim.MaxStderrBytes {
			over = true
			s.abort(sizeLimit(StreamStderr))
		}
		if err != nil {
			return
		}
	}
}

// next returns the next line of stdout; ok is false at the end of the
// stream. It returns the abort's cause as soon as there is one.
func (s *session) next() (line []byte, ok bool, e *Error) {
	for {
		select {
		case <-s.aborted:
			return nil, false, s.abortErr
		default:
		}
		s.mu.Lock()
		if len(s.lines) > 0 {
			line = s.lines[0]
			s.lines = s.lines[1:]
			s.mu.Unlock()
			return line, true, nil
		}
		eof := s.stdoutEOF
		s.mu.Unlock()
		if eof {
			return nil, false, nil
		}
		select {
		case <-s.aborted:
		case <-s.lineReady:
		}
	}
}

// send writes one message to stdin. The write cannot block past the
// abort, which the wall-time limit and cancellation cause.
func (s *session) send(b []byte) *Error {
	_, err := s.stdin.Write(b)
	select {
	case <-s.aborted:
		return s.abortErr
	default:
	}
	if err != nil {
		return newError(CodePluginFailed, "the extension's standard input broke")
	}
	return nil
}

// wireMessage is one line of the extension's: a request, a notification
// or a response.
type wireMessage struct {
	JSONRPC string           `json:"jsonrpc"`
	ID      json.RawMessage  `json:"id"`
	Method  *string          `json:"method"`
	Params  json.RawMessage  `json:"params"`
	Result  json.RawMessage  `json:"result"`
	Error   *json.RawMessage `json:"error"`
}

// wireError is an error response's error member.
type wireError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// roundTrip sends one request and returns the result of its answer. On the
// way it answers the extension's own requests with unsupported (there is
// no host service in a one-shot invocation) and drops its notifications.
// what names the request in the host's messages.
func (s *session) roundTrip(msg []byte, id int64, what string) (json.RawMessage, *Error) {
	if e := s.send(msg); e != nil {
		return nil, e
	}
	for {
		line, ok, e := s.next()
		if e != nil {
			return nil, e
		}
		if !ok {
			return nil, s.endedBefore(what)
		}
		m, e := readMessage(line)
		if e != nil {
			return nil, e
		}
		switch {
		case m == nil: // a blank line
		case m.Method != nil:
			if m.ID != nil {
				if e := s.send(unsupportedAnswer(m.ID)); e != nil {
					return nil, e
				}
			}
		case !sameID(m.ID, id):
			return nil, newError(CodeProtocolInvalid, "the extension answered with an id the host did not send")
		case m.Error != nil:
			return nil, newError(CodePluginFailed, "the extension answered "+what+" with an error")
		default:
			return m.Result, nil
		}
	}
}

// endedBefore is the failure of an extension whose stdout ended before it
// answered: it closed its output or exited.
func (s *session) endedBefore(what string) *Error {
	select {
	case <-s.exited:
	case <-s.aborted:
		return s.abortErr
	}
	if s.waitErr != nil {
		return newError(CodePluginFailed, "the extension exited with a failure before it answered "+what)
	}
	return newError(CodePluginFailed, "the extension closed its output before it answered "+what)
}

// readMessage holds one line to the strict JSON rule and the shape of a
// JSON-RPC 2.0 message. A blank line is nil.
func readMessage(line []byte) (*wireMessage, *Error) {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil, nil
	}
	if err := checkStrict(line); err != nil {
		return nil, newError(CodeProtocolInvalid, "the extension wrote a line that is not strict JSON: "+err.Error())
	}
	var m wireMessage
	if !isObject(line) || decodeExact(line, &m) != nil || m.JSONRPC != "2.0" {
		return nil, newError(CodeProtocolInvalid, "the extension wrote a line that is not a JSON-RPC 2.0 message")
	}
	invalid := newError(CodeProtocolInvalid, "the extension wrote a JSON-RPC message of no valid shape")
	if m.Method != nil {
		if m.Result != nil || m.Error != nil || *m.Method == "" || (m.ID != nil && !validID(m.ID)) {
			return nil, invalid
		}
		return &m, nil
	}
	if m.ID == nil || (m.Result == nil) == (m.Error == nil) {
		return nil, invalid
	}
	if m.Error != nil {
		var we wireError
		if decodeExact(*m.Error, &we) != nil {
			return nil, invalid
		}
	}
	return &m, nil
}

// validID reports whether a request id is an integer or a string.
func validID(id json.RawMessage) bool {
	if len(id) > 0 && id[0] == '"' {
		return true
	}
	_, err := strconv.ParseInt(string(id), 10, 64)
	return err == nil
}

func sameID(raw json.RawMessage, id int64) bool {
	return string(raw) == strconv.FormatInt(id, 10)
}

// unsupportedAnswer answers an extension's request: an invocation serves no
// host method.
func unsupportedAnswer(id json.RawMessage) []byte {
	e := protocol.NewError(protocol.CodeUnsupported, "a one-shot invocation serves no host method")
	msg, data := e.WireData()
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   any             `json:"error"`
	}{"2.0", id, map[string]any{"code": e.WireNumber(), "message": msg, "data": data}})
	return append(b, '\n')
}

// finish ends a successful exchange: stdin closed, the process exited with
// status 0, what is left of its group killed, and both streams read to
// their end, every line still held to the protocol.
func (s *session) finish() *Error {
	s.stdin.Close()
	select {
	case <-s.exited:
	case <-s.aborted:
		return s.abortErr
	}
	if s.waitErr != nil {
		return newError(CodePluginFailed, "the extension exited with a failure after shutdown")
	}
	// Ordinary descendants still holding the pipes go with the group.
	_ = killGroup(s.pgid, syscall.SIGKILL)
	for {
		line, ok, e := s.next()
		if e != nil {
			return e
		}
		if !ok {
			break
		}
		m, e := readMessage(line)
		if e != nil {
			return e
		}
		if m != nil && m.Method == nil {
			return newError(CodeProtocolInvalid, "the extension answered a request after shutdown that the host did not send")
		}
	}
	select {
	case <-s.stderrDone:
	case <-s.aborted:
		return s.abortErr
	}
	return nil
}

// cleanup kills the group, reaps the process and drains the pipes within
// budget. detached reports output still held open once the process was
// reaped and its group killed: by a descendant that left the group, which
// was not killed.
func (s *session) cleanup(budget time.Duration) (detached bool, failed *Error) {
	s.abort(nil) // ends a write in progress; a nil cause is read by nobody
	t := time.NewTimer(budget)
	defer t.Stop()
	var problems []string
	if err := killGroup(s.pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		problems = append(problems, "the process group could not be signalled")
	}
	s.stdin.Close()
	reaped := true
	select {
	case <-s.exited:
	case <-t.C:
		reaped = false
		problems = append(problems, "the process was not reaped within cleanup_time_ms")
	}
	if reaped {
		for _, done := range []chan struct{}{s.stdoutDone, s.stderrDone} {
			select {
			case <-done:
			case <-t.C:
				detached = true
			}
			if detached {
				break
			}
		}
	}
	s.stdout.Close()
	s.stderr.Close()
	if len(problems) > 0 {
		failed = newError(CodeCleanupFailed, problems[0])
		for _, p := range problems[1:] {
			failed.Message += "; " + p
		}
	}
	return detached, failed
}
