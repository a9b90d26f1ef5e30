package jsonrpc_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"
	"testing"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/stretchr/testify/require"
)

// childEnv names the child the re-executed test binary plays.
const childEnv = "JSONRPC_TEST_CHILD"

// children are the programs the test binary runs as when re-executed.
var children = map[string]func(){
	// peer serves the transport suite's extension side on stdio, with
	// os.Stdout moved to stderr first, as an extension SDK does.
	"peer": func() {
		protocolOut := os.Stdout
		os.Stdout = os.Stderr
		p := &conformance.TransportPeer{Crash: func() { os.Exit(3) }, Stdout: os.Stdout}
		if path := os.Getenv("JSONRPC_TEST_CHILD_CPUPROFILE"); path != "" {
			// For profiling the extension side of the benchmarks.
			if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
		_ = conformance.ServeTransportPeer(context.Background(), os.Stdin, protocolOut, p)
	},
	// peer-inline is peer with its pure methods served on the reader.
	"peer-inline": func() {
		protocolOut := os.Stdout
		os.Stdout = os.Stderr
		p := &conformance.TransportPeer{Crash: func() { os.Exit(3) }, Stdout: os.Stdout}
		conn := jsonrpc.NewConn(os.Stdin, protocolOut, p.Handler(), &jsonrpc.Options{
			DecodeError: decodeProtocolError, ReuseParams: true, Inline: inlinePeerMethod})
		<-conn.Done()
	},
	// peer-eager is peer with every method started on the reader and
	// handed on when it calls back or runs long (Options.Eager).
	"peer-eager": func() {
		protocolOut := os.Stdout
		os.Stdout = os.Stderr
		p := &conformance.TransportPeer{Crash: func() { os.Exit(3) }, Stdout: os.Stdout}
		conn := jsonrpc.NewConn(os.Stdin, protocolOut, p.Handler(), &jsonrpc.Options{
			DecodeError: decodeProtocolError, ReuseParams: true, Eager: func(string) bool { return true }})
		<-conn.Done()
	},
	// peer-stdout-unmoved is a negative control: a peer that leaves
	// os.Stdout on the protocol stream, so stray output corrupts it.
	"peer-stdout-unmoved": func() {
		p := &conformance.TransportPeer{Crash: func() { os.Exit(3) }, Stdout: os.Stdout}
		_ = conformance.ServeTransportPeer(context.Background(), os.Stdin, os.Stdout, p)
	},
	// raw-echo writes every line back: the baseline without JSON.
	"raw-echo": func() {
		rawLoop(func(line []byte) []byte { return line })
	},
	// raw-ack answers every line with a short one: the baseline of an
	// acknowledged chunk without JSON.
	"raw-ack": func() {
		ack := []byte("ok\n")
		rawLoop(func([]byte) []byte { return ack })
	},
}

func rawLoop(answer func(line []byte) []byte) {
	br := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := br.ReadSlice('\n')
		for err == bufio.ErrBufferFull {
			var more []byte
			more, err = br.ReadSlice('\n')
			line = append(append([]byte(nil), line...), more...)
		}
		if err != nil {
			return
		}
		if _, err := os.Stdout.Write(answer(line)); err != nil {
			return
		}
	}
}

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		// A late answer written after the host closed its end must fail
		// with EPIPE, not kill the child with SIGPIPE (what Go does for a
		// write to a broken stdout), so the child still exits cleanly at
		// end of input.
		signal.Ignore(syscall.SIGPIPE)
		child, ok := children[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown child %q\n", name)
			os.Exit(2)
		}
		child()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child is a running re-executed test binary.
type child struct {
	cmd    *exec.Cmd
	stdout *os.File // the host reads this
	stdin  *os.File // the host writes this
	stderr *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startChild re-executes the test binary as the named child, its stdio
// on pipes of our own (so Wait never closes what the host still reads).
func startChild(ctx context.Context, name string) (*child, error) {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+name)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	growPipe(inW)
	growPipe(outW)
	c := &child{cmd: cmd, stdout: outR, stdin: inW, stderr: &lockedBuffer{}}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, c.stderr
	err = cmd.Start()
	_ = inR.Close()
	_ = outW.Close()
	if err != nil {
		_ = inW.Close()
		_ = outR.Close()
		return nil, err
	}
	return c, nil
}

// stop closes the child's input, which must make it exit, and waits.
func (c *child) stop() error {
	_ = c.stdin.Close()
	err := c.cmd.Wait()
	_ = c.stdout.Close()
	if err != nil {
		return fmt.Errorf("%w (stderr: %q)", err, c.stderr.String())
	}
	return nil
}

// subprocessDriver runs the named child (a transport peer) as a child
// process.
func subprocessDriver(name string) conformance.TransportDriver {
	return conformance.TransportDriver{
		Subprocess: true,
		Start: func(ctx context.Context) (conformance.TransportEndpoint, error) {
			c, err := startChild(ctx, name)
			if err != nil {
				return conformance.TransportEndpoint{}, err
			}
			return conformance.TransportEndpoint{Reader: c.stdout, Writer: c.stdin, Stop: c.stop}, nil
		},
	}
}

// pipeDriver runs the peer in this process, in a goroutine, over a pair
// of os.Pipe; wrap may weaken its handler.
func pipeDriver(wrap func(jsonrpc.Handler) jsonrpc.Handler) conformance.TransportDriver {
	return conformance.TransportDriver{
		Start: func(context.Context) (conformance.TransportEndpoint, error) {
			hostR, peerW, err := os.Pipe()
			if err != nil {
				return conformance.TransportEndpoint{}, err
			}
			peerR, hostW, err := os.Pipe()
			if err != nil {
				return conformance.TransportEndpoint{}, err
			}
			var h jsonrpc.Handler = (&conformance.TransportPeer{}).Handler()
			if wrap != nil {
				h = wrap(h)
			}
			peer := jsonrpc.NewConn(peerR, peerW, h, nil)
			stop := func() error {
				// The host has closed its ends: the peer must see end of
				// input and end by itself.
				<-peer.Done()
				return nil
			}
			return conformance.TransportEndpoint{Reader: hostR, Writer: hostW, Stop: stop}, nil
		},
	}
}

// pipePair connects two Conns over os.Pipe; both are closed at cleanup.
func pipePair(t testing.TB, a, b jsonrpc.Handler, aOpts, bOpts *jsonrpc.Options) (*jsonrpc.Conn, *jsonrpc.Conn) {
	t.Helper()
	aR, bW, err := os.Pipe()
	require.NoError(t, err)
	bR, aW, err := os.Pipe()
	require.NoError(t, err)
	ca := jsonrpc.NewConn(aR, aW, a, aOpts)
	cb := jsonrpc.NewConn(bR, bW, b, bOpts)
	t.Cleanup(func() {
		_ = ca.Close()
		_ = cb.Close()
	})
	return ca, cb
}

// rawPeer is a Conn whose peer is the test itself, speaking raw lines.
type rawPeer struct {
	conn *jsonrpc.Conn
	in   io.WriteCloser // what the Conn reads
	out  *bufio.Reader  // what the Conn writes
}

func newRawPeer(t testing.TB, h jsonrpc.Handler, opts *jsonrpc.Options) *rawPeer {
	t.Helper()
	connR, testW, err := os.Pipe()
	require.NoError(t, err)
	testR, connW, err := os.Pipe()
	require.NoError(t, err)
	p := &rawPeer{conn: jsonrpc.NewConn(connR, connW, h, opts), in: testW, out: bufio.NewReader(testR)}
	t.Cleanup(func() {
		_ = p.conn.Close()
		_ = testW.Close()
		_ = testR.Close()
	})
	return p
}

func (p *rawPeer) send(t testing.TB, line string) {
	t.Helper()
	_, err := io.WriteString(p.in, line+"\n")
	require.NoError(t, err)
}

// next reads the next line the Conn wrote.
func (p *rawPeer) next(t testing.TB) string {
	t.Helper()
	line, err := p.out.ReadString('\n')
	require.NoError(t, err, "reading the Conn's next line")
	return line
}
