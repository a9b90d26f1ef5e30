package client

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func streamOf(body string, after int64) *ChangeStream {
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 0, 1024), maxStreamLine)
	return &ChangeStream{body: io.NopCloser(strings.NewReader("")), sc: sc, last: after}
}

func TestChangeStreamParsesServerSentEvents(t *testing.T) {
	body := ": keep-alive\n\n" +
		"id: 3\nevent: event\ndata: {\"seq\":3,\"kind\":\"event\",\"event\":{\"id\":\"e\",\"sequence\":1,\"source\":\"s\",\"delivery_id\":\"d\",\"depth\":0}}\n\n" +
		"id: 5\nevent: work\ndata: {\"seq\":5,\n" + "data: \"kind\":\"work\",\"work\":{\"id\":\"w\",\"scope_id\":\"a\",\"state\":\"done\",\"revision\":2}}\n\n"
	s := streamOf(body, 2)
	c, err := s.Next()
	require.NoError(t, err)
	assert.Equal(t, int64(3), c.Seq)
	require.NotNil(t, c.Event)
	assert.Equal(t, "e", c.Event.ID)
	c, err = s.Next()
	require.NoError(t, err, "data split over two lines joins")
	assert.Equal(t, int64(5), c.Seq)
	require.NotNil(t, c.Work)
	assert.Equal(t, WorkDone, c.Work.State)
	assert.Equal(t, int64(5), s.Last())
	_, err = s.Next()
	assert.ErrorIs(t, err, io.EOF)
}

func TestChangeStreamRefusesWhatTheDaemonShouldNeverSend(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":        "id: 1\ndata: {\n\n",
		"id and seq":      "id: 2\ndata: {\"seq\":1,\"kind\":\"event\"}\n\n",
		"backwards":       "data: {\"seq\":1,\"kind\":\"event\"}\n\n",
		"repeated":        "data: {\"seq\":7,\"kind\":\"event\"}\n\ndata: {\"seq\":7,\"kind\":\"event\"}\n\n",
		"line over bound": "data: " + strings.Repeat("x", maxStreamLine+1) + "\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			s := streamOf(body, 1)
			var err error
			for range 3 {
				if _, err = s.Next(); err != nil {
					break
				}
			}
			require.Error(t, err)
			assert.False(t, errors.Is(err, io.EOF), "a bad stream is an error, not its end: %v", err)
		})
	}
}

// FuzzChangeStream: whatever a daemon sends, Next never panics and only
// returns changes in increasing order.
func FuzzChangeStream(f *testing.F) {
	f.Add("id: 3\nevent: event\ndata: {\"seq\":3,\"kind\":\"event\"}\n\n")
	f.Add(": c\n\nid: 9\ndata: {\"seq\":9,\n\n")
	f.Add("data: {\"seq\":2}\n\ndata: {\"seq\":1}\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		s := streamOf(body, 0)
		last := int64(0)
		for range 100 {
			c, err := s.Next()
			if err != nil {
				return
			}
			if c.Seq <= last {
				t.Fatalf("seq %d after %d", c.Seq, last)
			}
			last = c.Seq
		}
	})
}
