package host_test

import (
	"bufio"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
)

// lineTap records the lines a Wire option sees, each with its direction.
type lineTap struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineTap) add(prefix, line string) {
	l.mu.Lock()
	l.lines = append(l.lines, prefix+strings.TrimRight(line, "\n"))
	l.mu.Unlock()
}

func (l *lineTap) has(prefix, substr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.HasPrefix(line, prefix) && strings.Contains(line, substr) {
			return true
		}
	}
	return false
}

type tapIn struct {
	io.ReadCloser
	br  *bufio.Reader
	tap *lineTap
}

func (t *tapIn) Read(p []byte) (int, error) {
	line, err := t.br.ReadString('\n')
	if line != "" {
		t.tap.add("<- ", line)
	}
	return copy(p, line), err // lines here are shorter than the connection's buffer
}

type tapOut struct {
	io.WriteCloser
	tap *lineTap
}

func (t *tapOut) Write(p []byte) (int, error) {
	t.tap.add("-> ", string(p))
	return t.WriteCloser.Write(p)
}

// TestProcessWireSeesEveryLineAndPID: the Wire option wraps both streams
// of every process the host starts, including after a restart, and PID and
// Version name the running process and its negotiated version.
func TestProcessWireSeesEveryLineAndPID(t *testing.T) {
	f := newFixture(t)
	tap := &lineTap{}
	p, _ := f.process("notes", manifestJSON("notes", "good", notesProvides("notes"), nil), func(c *host.Config) {
		c.Wire = func(r io.ReadCloser, w io.WriteCloser) (io.ReadCloser, io.WriteCloser) {
			return &tapIn{ReadCloser: r, br: bufio.NewReader(r), tap: tap}, &tapOut{WriteCloser: w, tap: tap}
		}
	})
	assert.Zero(t, p.PID(), "no process before Start")
	assert.Zero(t, p.Version())
	require.NoError(t, p.Start(ctxT(t)))
	assert.True(t, tap.has("-> ", `"method":"initialize"`), "the host's initialize went through the writer")
	assert.True(t, tap.has("<- ", `"protocol_version":1`), "the answer went through the reader")
	assert.True(t, tap.has("-> ", `"method":"configure"`))
	assert.Equal(t, protocol.Version(1), p.Version())

	pid := p.PID()
	require.NotZero(t, pid)
	gen := p.Generation()
	require.NoError(t, syscall.Kill(-pid, syscall.SIGKILL))
	require.NoError(t, f.clock.WaitForRequests(ctxT(t), 1))
	f.clock.Advance(host.BackoffMin)
	ctx := ctxT(t)
	for p.Generation() == gen {
		select {
		case <-p.Ready():
		case <-ctx.Done():
			t.Fatal("the package was not restarted")
		}
	}
	assert.NotEqual(t, pid, p.PID(), "a new process after the restart")
	require.NoError(t, p.Close(ctxT(t)))
	assert.Zero(t, p.PID(), "no process after Close")
}
