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

// TestChangeStreamMergesTheJournal: a journal change (id SEQ.N) comes
// after the log's change SEQ and before SEQ+1; the stream's cursor is
// both numbers.
func TestChangeStreamMergesTheJournal(t *testing.T) {
	body := "id: 3\ndata: {\"seq\":3,\"kind\":\"event\"}\n\n" +
		"id: 3.1\ndata: {\"seq\":3,\"journal\":1,\"kind\":\"package\",\"package\":{\"name\":\"notes\",\"state\":\"restarting\",\"restarts\":1,\"at\":\"2026-01-01T00:00:00Z\"}}\n\n" +
		"id: 3.2\ndata: {\"seq\":3,\"journal\":2,\"kind\":\"execution\",\"execution\":{\"id\":\"x\",\"work_id\":\"w\",\"attempt\":2,\"epoch\":3,\"state\":\"running\",\"at\":\"2026-01-01T00:00:00Z\"}}\n\n" +
		"id: 4\ndata: {\"seq\":4,\"kind\":\"work\",\"work_change\":\"created\",\"work\":{\"id\":\"w\",\"scope_id\":\"a\",\"state\":\"pending\",\"revision\":1}}\n\n"
	s := streamOf(body, 2)
	var got []string
	for {
		c, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		got = append(got, changeID(c)+" "+c.Kind)
	}
	assert.Equal(t, []string{"3 event", "3.1 package", "3.2 execution", "4 work"}, got)
	assert.Equal(t, int64(4), s.Last())
	assert.Equal(t, int64(2), s.LastJournal())
}

func TestChangeStreamRefusesWhatTheDaemonShouldNeverSend(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":                  "id: 1\ndata: {\n\n",
		"id and seq":                "id: 2\ndata: {\"seq\":1,\"kind\":\"event\"}\n\n",
		"backwards":                 "data: {\"seq\":1,\"kind\":\"event\"}\n\n",
		"repeated":                  "data: {\"seq\":7,\"kind\":\"event\"}\n\ndata: {\"seq\":7,\"kind\":\"event\"}\n\n",
		"line over bound":           "data: " + strings.Repeat("x", maxStreamLine+1) + "\n\n",
		"journal id":                "id: 2.1\ndata: {\"seq\":2,\"journal\":2,\"kind\":\"package\"}\n\n",
		"journal again":             "data: {\"seq\":2,\"journal\":3}\n\ndata: {\"seq\":3,\"journal\":3}\n\n",
		"journal behind":            "data: {\"seq\":5}\n\ndata: {\"seq\":4,\"journal\":1}\n\n",
		"log after its journal seq": "data: {\"seq\":5,\"journal\":1}\n\ndata: {\"seq\":5}\n\n",
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
	f.Add("id: 2.1\ndata: {\"seq\":2,\"journal\":1,\"kind\":\"package\"}\n\nid: 2\ndata: {\"seq\":2}\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		s := streamOf(body, 0)
		last, lastJournal := int64(0), int64(0)
		for range 100 {
			c, err := s.Next()
			if err != nil {
				return
			}
			switch {
			case c.Journal > 0 && (c.Journal <= lastJournal || c.Seq < last):
				t.Fatalf("journal change %d.%d after %d.%d", c.Seq, c.Journal, last, lastJournal)
			case c.Journal > 0:
				lastJournal = c.Journal
			case c.Seq <= last:
				t.Fatalf("seq %d after %d", c.Seq, last)
			}
			last = c.Seq
		}
	})
}
