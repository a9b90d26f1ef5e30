package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readWebhookBody reads a body of a declared length within the bound
// straight, and holds every other body to MaxWebhookBody as
// http.MaxBytesReader does: over the bound is a *http.MaxBytesError
// whether the length was declared or not, and a body shorter than its
// declared length is an error, never a delivery.
func TestReadWebhookBody(t *testing.T) {
	type outcome struct {
		body   []byte
		tooBig bool
		err    error
	}
	outcomes := make(chan outcome, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, err := readWebhookBody(rw, r)
		var tooBig *http.MaxBytesError
		outcomes <- outcome{body: body, tooBig: errors.As(err, &tooBig), err: err}
		if err != nil {
			rw.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer srv.Close()

	// send writes a raw request, the body after the headers, and returns
	// what the handler read and the answer (nil when the server answered
	// nothing).
	send := func(t *testing.T, headers, body string, closeWrite bool) (outcome, *http.Response) {
		t.Helper()
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, "POST /hook HTTP/1.1\r\nHost: x\r\n"+headers+"\r\n"+body)
		require.NoError(t, err)
		if closeWrite {
			require.NoError(t, conn.(*net.TCPConn).CloseWrite())
		}
		o := <-outcomes
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		resp.Body.Close()
		return o, resp
	}
	chunked := func(body string) string {
		var b strings.Builder
		for len(body) > 0 {
			n := min(len(body), 64<<10)
			fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
			body = body[n:]
		}
		return b.String() + "0\r\n\r\n"
	}
	atBound := strings.Repeat("x", MaxWebhookBody)

	for _, c := range []struct {
		name, headers, sent, body string
	}{
		{"declared", "Content-Length: 13\r\n", `{"notes":[]}` + "\n", `{"notes":[]}` + "\n"},
		{"declared empty", "Content-Length: 0\r\n", "", ""},
		{"declared at the bound", fmt.Sprintf("Content-Length: %d\r\n", MaxWebhookBody), atBound, atBound},
		{"chunked", "Transfer-Encoding: chunked\r\n", chunked(`{"notes":[]}`), `{"notes":[]}`},
		{"chunked at the bound", "Transfer-Encoding: chunked\r\n", chunked(atBound), atBound},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, resp := send(t, c.headers, c.sent, false)
			require.NoError(t, o.err)
			assert.Equal(t, len(c.body), len(o.body))
			assert.True(t, string(o.body) == c.body, "the body as sent")
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.False(t, resp.Close, "the connection is kept")
		})
	}

	t.Run("declared over the bound", func(t *testing.T) {
		o, resp := send(t, fmt.Sprintf("Content-Length: %d\r\n", MaxWebhookBody+1), atBound+"x", false)
		assert.True(t, o.tooBig, "a *http.MaxBytesError, not %v", o.err)
		assert.True(t, resp.Close, "the connection is not kept after a body over the bound")
	})
	t.Run("chunked over the bound", func(t *testing.T) {
		o, resp := send(t, "Transfer-Encoding: chunked\r\n", chunked(atBound+"x"), false)
		assert.True(t, o.tooBig, "a *http.MaxBytesError, not %v", o.err)
		assert.True(t, resp.Close, "the connection is not kept after a body over the bound")
	})
	t.Run("shorter than declared", func(t *testing.T) {
		o, _ := send(t, "Content-Length: 100\r\n", `{"notes":[]}`, true)
		assert.ErrorIs(t, o.err, io.ErrUnexpectedEOF)
		assert.False(t, o.tooBig)
		assert.Empty(t, o.body, "nothing of a short body is delivered")
	})
}
