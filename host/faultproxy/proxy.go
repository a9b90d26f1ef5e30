package faultproxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// MaxInspect bounds a line the proxy reads whole: the transport's own
// bound and a little. A longer line is passed through as it came, in
// pieces, and counted by no rule; the host's transport refuses it.
const MaxInspect = protocol.MaxMessageBytes + 1024

// maxTrackedIDs bounds the request ids remembered per direction for
// matching responses by method: an extension that never answers cannot
// grow the table without bound.
const maxTrackedIDs = 4096

// Options configure a Proxy. The zero value works.
type Options struct {
	// Kill ends the process group of pid (default SIGKILL to -pid).
	Kill func(pid int) error
	// AfterFunc runs f after d, returning a stop function (default
	// time.AfterFunc); tests pass a manual one so a delay needs no sleep.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	// Logf hears every fault that fires (method and kind only, never a
	// message's content).
	Logf func(format string, args ...any)
}

// Proxy holds one package's rules and interposes them on each of its
// processes (Interpose). Rules and their counts live in the Proxy, so they
// carry across a restart of the package. Its methods are safe for
// concurrent use.
type Proxy struct {
	opts Options

	mu      sync.Mutex
	rules   []*armed
	cleared chan struct{} // closed and replaced by Clear, waking stalls
}

type armed struct {
	rule           Rule
	counted, fired int
}

// RuleState is a rule and what it has done so far.
type RuleState struct {
	Rule Rule
	// Counted is how many messages matched its selectors; Fired how many
	// times it acted.
	Counted, Fired int
}

// New is a proxy with no rules: until one is added, it passes every line
// through unchanged.
func New(opts Options) *Proxy {
	if opts.Kill == nil {
		opts.Kill = killGroup
	}
	if opts.AfterFunc == nil {
		opts.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	return &Proxy{opts: opts, cleared: make(chan struct{})}
}

// killGroup sends SIGKILL to the process group pid leads (the host starts
// every package in its own group). It refuses a pid that is not a
// child's: kill(-1) or kill(0) would reach far more than the package.
func killGroup(pid int) error {
	if pid <= 1 {
		return fmt.Errorf("faultproxy: no process group to kill (pid %d)", pid)
	}
	return syscall.Kill(-pid, syscall.SIGKILL)
}

// Add arms rules, after those already armed. Their counts start at zero.
func (p *Proxy) Add(rules ...Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range rules {
		p.rules = append(p.rules, &armed{rule: r})
	}
}

// Clear disarms every rule and ends every stall.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
	close(p.cleared)
	p.cleared = make(chan struct{})
}

// Rules are the armed rules with their counts, in the order they were added.
func (p *Proxy) Rules() []RuleState {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]RuleState, len(p.rules))
	for i, a := range p.rules {
		out[i] = RuleState{Rule: a.rule, Counted: a.counted, Fired: a.fired}
	}
	return out
}

// message is what the proxy knows of one line.
type message struct {
	dir    Direction
	method string
	kind   Kind
}

func (r Rule) matches(m message) bool {
	return (r.Dir == "" || r.Dir == m.dir) && (r.Method == "" || r.Method == m.method) && (r.Kind == "" || r.Kind == m.kind)
}

// fire counts m against every armed rule and returns the first that fires
// on it. A rule with nth fires at its nth count and never again.
func (p *Proxy) fire(m message) (Rule, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var hit *armed
	for _, a := range p.rules {
		if (a.rule.Nth > 0 && a.counted >= a.rule.Nth) || !a.rule.matches(m) {
			continue
		}
		a.counted++
		if hit == nil && (a.rule.Nth == 0 || a.counted == a.rule.Nth) {
			hit = a
			a.fired++
		}
	}
	if hit == nil {
		return Rule{}, false
	}
	return hit.rule, true
}

func (p *Proxy) clearedChan() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cleared
}

// Interpose puts the proxy between the host and one process of the
// package: pid is the process (the leader of its group), stdout and stdin
// its streams. The host reads the returned reader and writes the returned
// writer. Closing the reader closes stdout; closing the writer closes
// stdin once what was written has gone through. Its signature is
// host.Config.Interpose's.
func (p *Proxy) Interpose(pid int, stdout io.ReadCloser, stdin io.WriteCloser) (io.ReadCloser, io.WriteCloser) {
	s := &session{p: p, pid: pid, extOut: stdout, extIn: stdin, done: make(chan struct{}),
		idsToExt: map[string]string{}, idsToHost: map[string]string{}}
	s.hostR, s.hostW = io.Pipe()
	s.extR, s.extW = io.Pipe()
	go s.pump(ToHost, stdout, s.writeHost, func() { s.hostW.Close() })
	go s.pump(ToExt, s.extR, s.writeExt, func() { stdin.Close() })
	return &hostReader{s}, s.extW
}

// session is the proxy on one process.
type session struct {
	p      *Proxy
	pid    int
	extOut io.ReadCloser
	extIn  io.WriteCloser

	hostR *io.PipeReader // the host reads what the to-host pump writes
	hostW *io.PipeWriter
	extR  *io.PipeReader // the to-ext pump reads what the host writes
	extW  *io.PipeWriter

	hostMu, extMu sync.Mutex // one write at a time per destination

	mu        sync.Mutex
	idsToExt  map[string]string // the host's requests: id → method
	idsToHost map[string]string // the extension's requests: id → method
	stall     chan struct{}     // non-nil while the host's reader is stalled
	timers    []func() bool

	done      chan struct{}
	closeOnce sync.Once
}

// hostReader is the host's end of the extension's stdout.
type hostReader struct{ s *session }

func (r *hostReader) Read(b []byte) (int, error) { return r.s.hostR.Read(b) }

func (r *hostReader) Close() error {
	r.s.end()
	return nil
}

// end releases the session: the host let go of the stream.
func (s *session) end() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.hostR.Close()
		s.extOut.Close()
		s.mu.Lock()
		for _, stop := range s.timers {
			stop()
		}
		s.timers = nil
		s.mu.Unlock()
	})
}

func (s *session) writeHost(b []byte) error {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	_, err := s.hostW.Write(b)
	return err
}

func (s *session) writeExt(b []byte) error {
	s.extMu.Lock()
	defer s.extMu.Unlock()
	_, err := s.extIn.Write(b)
	return err
}

// pump moves lines from src to write, one at a time, applying the faults
// that fire; at the end of src (or a failed write) it calls finish. A
// to-ext write failure (the extension died) fails the host's later writes
// rather than blocking them.
func (s *session) pump(dir Direction, src io.Reader, write func([]byte) error, finish func()) {
	defer finish()
	br := bufio.NewReaderSize(src, 64<<10)
	var held []byte // a line reorder holds until the next one
	fail := func(err error) {
		if dir == ToExt {
			s.extR.CloseWithError(err)
		} else {
			s.extOut.Close()
		}
	}
	for {
		line, whole, err := readLine(br, write)
		if len(line) > 0 && whole {
			if dir == ToHost {
				s.waitStall()
			}
			m := s.inspect(dir, line)
			next, werr := s.apply(dir, m, line, write)
			if werr == nil && held != nil {
				werr = write(held)
			}
			held = next
			if werr != nil {
				fail(werr)
				return
			}
		} else if len(line) > 0 {
			// An over-long line went through raw; its last piece too.
			if werr := write(line); werr != nil {
				fail(werr)
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fail(err)
			}
			return
		}
	}
}

// readLine reads one line with its newline (the last may lack one). A
// line over MaxInspect is written through raw as it is read, and its last
// piece returned with whole false.
func readLine(br *bufio.Reader, write func([]byte) error) ([]byte, bool, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > MaxInspect {
			if len(line) > 0 {
				if werr := write(line); werr != nil {
					return nil, false, werr
				}
				line = nil
			}
			for errors.Is(err, bufio.ErrBufferFull) {
				if werr := write(chunk); werr != nil {
					return nil, false, werr
				}
				chunk, err = br.ReadSlice('\n')
			}
			return append([]byte(nil), chunk...), false, err
		}
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, true, err
		}
	}
}

// inspect reads what the line says of itself, and remembers a request's
// method for its response.
func (s *session) inspect(dir Direction, line []byte) message {
	m := message{dir: dir}
	var env struct {
		Method *string          `json:"method"`
		ID     *json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &env) != nil {
		return m
	}
	id := ""
	if env.ID != nil && !bytes.Equal(*env.ID, []byte("null")) {
		id = string(*env.ID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sent, answered := s.idsToExt, s.idsToHost
	if dir == ToHost {
		sent, answered = s.idsToHost, s.idsToExt
	}
	switch {
	case env.Method != nil && id != "":
		m.kind, m.method = KindRequest, *env.Method
		if len(sent) < maxTrackedIDs {
			sent[id] = m.method
		}
	case env.Method != nil:
		m.kind, m.method = KindNotification, *env.Method
	case env.ID != nil:
		m.kind = KindResponse
		if method, ok := answered[id]; ok {
			m.method = method
			delete(answered, id)
		}
	}
	return m
}

// apply sends line as the fault that fires on it says, and returns the
// line to hold for after the next one (reorder).
func (s *session) apply(dir Direction, m message, line []byte, write func([]byte) error) (held []byte, err error) {
	r, ok := s.p.fire(m)
	if !ok {
		return nil, write(line)
	}
	fired := func() {
		s.p.opts.Logf("fault %q fired on a %s %s %s (pid %d)", r.String(), dir, orNone(string(m.kind)), orNone(m.method), s.pid)
	}
	if r.Fault != Stall {
		fired()
	}
	content := bytes.TrimSuffix(line, []byte("\n"))
	switch r.Fault {
	case Delay:
		out := bytes.Clone(line)
		s.mu.Lock()
		s.timers = append(s.timers, s.p.opts.AfterFunc(r.For, func() {
			select {
			case <-s.done:
			default:
				_ = write(out)
			}
		}))
		s.mu.Unlock()
		return nil, nil
	case Drop:
		return nil, nil
	case Duplicate:
		if err := write(line); err != nil {
			return nil, err
		}
		return nil, write(line)
	case Reorder:
		return bytes.Clone(line), nil
	case Truncate:
		n := len(content) / 2
		if r.At > 0 {
			n = min(r.At, len(content))
		}
		return nil, write(append(bytes.Clone(content[:n]), '\n'))
	case Corrupt:
		out := bytes.Clone(line)
		if len(out) > 0 {
			out[0] = 0xff
		}
		return nil, write(out)
	case CloseStdout:
		s.hostW.Close()
		s.extOut.Close()
		return nil, nil
	case Stall:
		s.startStall(r.For)
		fired() // once the stall stands: whoever hears of it finds it in force
		if dir == ToHost {
			s.waitStall()
		}
		return nil, write(line)
	case Crash:
		if err := s.p.opts.Kill(s.pid); err != nil {
			s.p.opts.Logf("fault %q: %v", r.String(), err)
		}
		return nil, nil
	}
	return nil, write(line)
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// startStall stalls the host's reader for d (0: until Clear).
func (s *session) startStall(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stall != nil {
		return
	}
	ch := make(chan struct{})
	s.stall = ch
	var once sync.Once
	release := func() {
		once.Do(func() {
			s.mu.Lock()
			if s.stall == ch {
				s.stall = nil
			}
			s.mu.Unlock()
			close(ch)
		})
	}
	if d > 0 {
		s.timers = append(s.timers, s.p.opts.AfterFunc(d, release))
	}
	cleared := s.p.clearedChan()
	go func() {
		select {
		case <-cleared:
		case <-s.done:
		case <-ch:
			return
		}
		release()
	}()
}

// waitStall waits while the host's reader is stalled.
func (s *session) waitStall() {
	s.mu.Lock()
	ch := s.stall
	s.mu.Unlock()
	if ch != nil {
		<-ch
	}
}
