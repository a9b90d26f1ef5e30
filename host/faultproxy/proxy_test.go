package faultproxy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host/faultproxy"
)

// The test binary re-runs itself as the extension a proxy sits in front
// of: with childEnv set, TestMain serves the child instead of the tests.
const childEnv = "FAULTPROXY_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "echo" {
		serveEcho()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveEcho is a line-level JSON-RPC peer, deliberately free of the
// project's transport: it answers each request with its params as the
// result, in the order read; "tick" first sends a notification "tock"
// with the same params; a line that is not JSON is answered with a parse
// error of id null. It exits at the end of stdin.
func serveEcho() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			fmt.Fprintln(out, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`)
			out.Flush()
			continue
		}
		if req.Method == "tick" {
			fmt.Fprintf(out, `{"jsonrpc":"2.0","method":"tock","params":%s}`+"\n", req.Params)
		}
		if req.ID != nil {
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", req.ID, req.Params)
		}
		out.Flush()
	}
}

// child is one echo process with a proxy between it and the test, which
// plays the host: send writes a request, next reads what reached the host.
type child struct {
	t     *testing.T
	cmd   *exec.Cmd
	w     io.WriteCloser
	lines chan []byte
	ended chan error // the host's reader ended: io.EOF or the error
	timer *manualTimers
	fired chan string
}

const waitBound = 20 * time.Second

func startChild(t *testing.T, rules ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=echo")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	c := &child{t: t, cmd: cmd, lines: make(chan []byte, 64), ended: make(chan error, 1), timer: &manualTimers{}, fired: make(chan string, 16)}
	p := faultproxy.New(faultproxy.Options{AfterFunc: c.timer.afterFunc,
		Logf: func(format string, args ...any) { c.fired <- fmt.Sprintf(format, args...) }})
	for _, text := range rules {
		r, err := faultproxy.ParseRule(text)
		require.NoError(t, err)
		p.Add(r)
	}
	r, w := p.Interpose(cmd.Process.Pid, stdout, stdin)
	c.w = w
	go func() {
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				c.lines <- line
			}
			if err != nil {
				c.ended <- err
				return
			}
		}
	}()
	t.Cleanup(func() {
		w.Close()
		r.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return c
}

func (c *child) send(id int, method string) {
	c.t.Helper()
	_, err := fmt.Fprintf(c.w, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%d}`+"\n", id, method, id)
	require.NoError(c.t, err)
}

func (c *child) sendRaw(line string) {
	c.t.Helper()
	_, err := io.WriteString(c.w, line+"\n")
	require.NoError(c.t, err)
}

// next is the next line that reached the host.
func (c *child) next() []byte {
	c.t.Helper()
	select {
	case l := <-c.lines:
		return l
	case err := <-c.ended:
		c.t.Fatalf("the host's reader ended (%v) where a line was expected", err)
	case <-time.After(waitBound):
		c.t.Fatal("no line reached the host")
	}
	return nil
}

// name is a response's id, or "notification METHOD".
func (c *child) name(line []byte) string {
	c.t.Helper()
	var res struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	require.NoError(c.t, json.Unmarshal(line, &res), "%q", line)
	if res.Method != "" {
		return "notification " + res.Method
	}
	return string(res.ID)
}

// waitEnd waits for the host's reader to end and returns how.
func (c *child) waitEnd() error {
	c.t.Helper()
	for {
		select {
		case l := <-c.lines:
			c.t.Fatalf("a line %q reached the host where the end was expected", l)
		case err := <-c.ended:
			return err
		case <-time.After(waitBound):
			c.t.Fatal("the host's reader did not end")
		}
	}
}

func (c *child) waitFired() string {
	c.t.Helper()
	select {
	case s := <-c.fired:
		return s
	case <-time.After(waitBound):
		c.t.Fatal("no fault fired")
	}
	return ""
}

// manualTimers is an AfterFunc that runs only when told.
type manualTimers struct {
	mu      sync.Mutex
	pending []manualTimer
}

type manualTimer struct {
	d time.Duration
	f func()
}

func (m *manualTimers) afterFunc(d time.Duration, f func()) func() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = append(m.pending, manualTimer{d, f})
	return func() bool { return false }
}

// fireAll runs every pending timer and returns their durations.
func (m *manualTimers) fireAll() []time.Duration {
	m.mu.Lock()
	p := m.pending
	m.pending = nil
	m.mu.Unlock()
	var ds []time.Duration
	for _, t := range p {
		ds = append(ds, t.d)
		t.f()
	}
	return ds
}

// Each case runs the same exchange twice against a real child: without
// its rule (the negative control: what the exchange gives untouched) and
// with it; a fault that changes nothing fails its case.
func TestFaultsAgainstARealChild(t *testing.T) {
	cases := []struct {
		name, rule string
		// exchange drives the child and returns what the host saw.
		exchange func(c *child, faulted bool) []string
		want     []string // what the host sees with the rule
		control  []string // and without it
	}{
		{
			name: "drop a request to the extension", rule: "drop dir=to-ext nth=1",
			exchange: func(c *child, _ bool) []string { c.send(1, "echo"); c.send(2, "echo"); return ids(c, 1) },
			want:     []string{"2"}, control: []string{"1"},
		},
		{
			name: "drop the nth response to the host", rule: "drop dir=to-host kind=response nth=2",
			exchange: func(c *child, _ bool) []string {
				c.send(1, "echo")
				c.send(2, "echo")
				c.send(3, "echo")
				return ids(c, 2)
			},
			want: []string{"1", "3"}, control: []string{"1", "2"},
		},
		{
			name: "a response matched by the method it answers", rule: "drop dir=to-host method=other kind=response",
			exchange: func(c *child, _ bool) []string {
				c.send(1, "other")
				c.send(2, "echo")
				c.send(3, "other")
				c.send(4, "echo")
				return ids(c, 2)
			},
			want: []string{"2", "4"}, control: []string{"1", "2"},
		},
		{
			name: "duplicate a response", rule: "duplicate kind=response nth=1",
			exchange: func(c *child, _ bool) []string {
				c.send(1, "echo")
				c.send(2, "echo")
				c.send(3, "echo")
				return ids(c, 3)
			},
			want: []string{"1", "1", "2"}, control: []string{"1", "2", "3"},
		},
		{
			name: "reorder two requests", rule: "reorder dir=to-ext nth=1",
			exchange: func(c *child, _ bool) []string { c.send(1, "echo"); c.send(2, "echo"); return ids(c, 2) },
			want:     []string{"2", "1"}, control: []string{"1", "2"},
		},
		{
			name: "delay a method's request until its time", rule: "delay dir=to-ext method=slow for=2s",
			exchange: func(c *child, faulted bool) []string {
				c.send(1, "slow")
				c.send(2, "echo")
				got := ids(c, 1)
				if faulted {
					assert.Equal(c.t, []time.Duration{2 * time.Second}, c.timer.fireAll())
				}
				return append(got, ids(c, 1)...)
			},
			want: []string{"2", "1"}, control: []string{"1", "2"},
		},
		{
			name: "truncate a request: the extension reads a broken line", rule: "truncate dir=to-ext nth=1 at=12",
			exchange: func(c *child, _ bool) []string { c.send(1, "echo"); return ids(c, 1) },
			want:     []string{"null"}, control: []string{"1"},
		},
		{
			name: "corrupt a response: the host reads a line that is not JSON", rule: "corrupt dir=to-host",
			exchange: func(c *child, _ bool) []string {
				c.send(1, "echo")
				line := c.next()
				return []string{fmt.Sprint(json.Valid(line)), fmt.Sprint(line[0] == 0xff)}
			},
			want: []string{"false", "true"}, control: []string{"true", "false"},
		},
		{
			name: "truncate a response at half", rule: "truncate dir=to-host",
			exchange: func(c *child, _ bool) []string {
				c.send(1, "echo")
				line := c.next()
				return []string{fmt.Sprint(json.Valid(line)), fmt.Sprint(len(line) < 30)}
			},
			want: []string{"false", "true"}, control: []string{"true", "false"},
		},
		{
			name: "close the extension's stdout at the second request", rule: "close-stdout method=echo kind=request nth=2",
			exchange: func(c *child, faulted bool) []string {
				c.send(1, "echo")
				got := ids(c, 1)
				c.send(2, "echo")
				if faulted {
					return append(got, fmt.Sprint(c.waitEnd()))
				}
				return append(got, ids(c, 1)...)
			},
			want: []string{"1", "EOF"}, control: []string{"1", "2"},
		},
		{
			name: "crash at the nth request of a method", rule: "crash method=tick kind=request nth=2",
			exchange: func(c *child, faulted bool) []string {
				c.send(1, "tick")
				got := ids(c, 2)
				c.send(2, "tick")
				if !faulted {
					return append(got, ids(c, 2)...)
				}
				got = append(got, fmt.Sprint(c.waitEnd()))
				err := c.cmd.Wait()
				var exit *exec.ExitError
				require.ErrorAs(c.t, err, &exit)
				ws := exit.Sys().(syscall.WaitStatus)
				return append(got, fmt.Sprint(ws.Signaled() && ws.Signal() == syscall.SIGKILL))
			},
			want: []string{"notification tock", "1", "EOF", "true"}, control: []string{"notification tock", "1", "notification tock", "2"},
		},
		{
			name: "crash at message n in either direction", rule: "crash nth=3",
			exchange: func(c *child, faulted bool) []string {
				c.send(1, "echo") // message 1
				got := ids(c, 1)  // message 2
				c.send(2, "echo") // message 3
				if faulted {
					return append(got, fmt.Sprint(c.waitEnd()))
				}
				return append(got, ids(c, 1)...)
			},
			want: []string{"1", "EOF"}, control: []string{"1", "2"},
		},
		{
			name: "stall the host's reader until its time", rule: "stall dir=to-host kind=notification nth=1 for=1m",
			exchange: func(c *child, faulted bool) []string {
				c.send(1, "tick")
				if !faulted {
					return ids(c, 2)
				}
				c.waitFired()
				// Held: the child's answer and a later one queue behind the stall.
				c.send(2, "echo")
				c.sendRaw(`{"jsonrpc":"2.0","id":3,"method":"echo","params":3}`)
				select {
				case l := <-c.lines:
					c.t.Errorf("%q reached the host through a stall", l)
				default:
				}
				assert.Equal(c.t, []time.Duration{time.Minute}, c.timer.fireAll())
				return ids(c, 2)
			},
			want: []string{"notification tock", "1"}, control: []string{"notification tock", "1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.exchange(startChild(t), false)
			require.Equal(t, tc.control, got, "the exchange without the rule (negative control)")
			c := startChild(t, tc.rule)
			got = tc.exchange(c, true)
			assert.Equal(t, tc.want, got, "with %q", tc.rule)
		})
	}
}

// ids reads n lines and names each: a response's id, or "notification
// METHOD"; "ended" when the host's reader ended first.
func ids(c *child, n int) []string {
	c.t.Helper()
	var out []string
	for range n {
		select {
		case l := <-c.lines:
			out = append(out, c.name(l))
		case err := <-c.ended:
			c.ended <- err
			return append(out, "ended")
		case <-time.After(waitBound):
			c.t.Fatal("no line reached the host")
		}
	}
	return out
}
