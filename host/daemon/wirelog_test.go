package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nopWriteCloser is a process's stdin in these tests.
type nopWriteCloser struct{ bytes.Buffer }

func (*nopWriteCloser) Close() error { return nil }

// wireRecords reads a wire log back.
func wireRecords(t *testing.T, path string) []WireRecord {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []WireRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r WireRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	return out
}

// tapRun passes fromExt through a tap of pkg as the package's stdout and
// writes each of toExt to its stdin, then returns what came out each side.
func tapRun(t *testing.T, l *WireLog, pkg string, fromExt string, toExt ...string) (string, string) {
	t.Helper()
	stdin := &nopWriteCloser{}
	r, w := l.Tap(pkg)(io.NopCloser(strings.NewReader(fromExt)), stdin)
	// Read in small pieces so lines arrive split across Reads.
	var out bytes.Buffer
	buf := make([]byte, 7)
	for {
		n, err := r.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, m := range toExt {
		_, err := w.Write([]byte(m))
		require.NoError(t, err)
	}
	return out.String(), stdin.String()
}

// TestWireLogRecordsBothDirectionsAndRedactsSecrets: every line is
// recorded with its direction and passed on unchanged, the answer to the
// package's secret.resolve (by its id, string or number) and a run's
// toolbelt token are redacted, and other answers are kept.
func TestWireLogRecordsBothDirectionsAndRedactsSecrets(t *testing.T) {
	dir := t.TempDir()
	l := NewWireLog(dir)
	fromExt := `{"jsonrpc":"2.0","id":7,"method":"secret.resolve","params":{"connection":"hook"}}` + "\n" +
		`{"jsonrpc":"2.0","id":"s","method":"secret.resolve","params":{"connection":"hook"}}` + "\n" +
		`{"jsonrpc":"2.0","id":8,"method":"kv.get","params":{}}` + "\n" +
		"not json\n"
	toExt := []string{
		`{"jsonrpc":"2.0","id":7,"result":{"values":{"token":"hunter2-number"}}}` + "\n",
		`{"jsonrpc":"2.0","id":"s","result":{"values":{"token":"hunter2-string"}}}` + "\n",
		`{"jsonrpc":"2.0","id":8,"result":{"value":"kept"}}` + "\n",
		`{"jsonrpc":"2.0","id":1,"method":"webhook.handle","params":{}}` + "\n",
		`{"jsonrpc":"2.0","id":2,"method":"executor.run","params":{"run_id":"r1","token":"otb1.hunter2-token"}}` + "\n",
	}
	gotOut, gotIn := tapRun(t, l, "p", fromExt, toExt...)
	require.NoError(t, l.Close())
	assert.Equal(t, fromExt, gotOut, "the package's stdout passes unchanged")
	assert.Equal(t, strings.Join(toExt, ""), gotIn, "the daemon's writes pass unchanged")

	path := filepath.Join(dir, "p.wire.jsonl")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "hunter2", "no secret.resolve result or toolbelt token is logged")
	recs := wireRecords(t, path)
	require.Len(t, recs, 9)
	for i, r := range recs {
		want := WireFromExtension
		if i >= 4 {
			want = WireToExtension
		}
		assert.Equal(t, want, r.Direction, "record %d", i)
		assert.False(t, r.Time.IsZero())
	}
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":8,"method":"kv.get","params":{}}`, string(recs[2].Message))
	assert.Equal(t, "not json", recs[3].Text)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":7,"result":"[redacted]"}`, string(recs[4].Message))
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"s","result":"[redacted]"}`, string(recs[5].Message))
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":8,"result":{"value":"kept"}}`, string(recs[6].Message))
	assert.Contains(t, string(recs[7].Message), `"webhook.handle"`)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":2,"method":"executor.run","params":{"run_id":"r1","token":"[redacted]"}}`, string(recs[8].Message))
}

// TestWireLogRedactsLongLines: a secret.resolve request padded past the
// line bound is still read whole, so its answer is redacted; an answer
// past the bound is redacted before it is cut; and an answer too long to
// read at all, while a secret is owed, keeps nothing of its text.
func TestWireLogRedactsLongLines(t *testing.T) {
	pad := strings.Repeat(" ", WireLogLineBytes+10)
	longAsk := `{"jsonrpc":"2.0","id":1,` + pad + `"method":"secret.resolve","params":{}}` + "\n"
	longAnswer := `{"jsonrpc":"2.0","id":1,"result":{"values":{"k":"` + strings.Repeat("S", WireLogLineBytes) + `"}}}` + "\n"
	for name, tc := range map[string]struct{ ask, answer, want string }{
		"a long request":   {longAsk, `{"jsonrpc":"2.0","id":1,"result":{"values":{"k":"hunter2"}}}` + "\n", "message"},
		"a long answer":    {`{"jsonrpc":"2.0","id":1,"method":"secret.resolve"}` + "\n", longAnswer, "message"},
		"an unread answer": {`{"jsonrpc":"2.0","id":1,"method":"secret.resolve"}` + "\n", `{"id":1,"result":"` + strings.Repeat("S", wireParseBytes) + `"}` + "\n", "text"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l := NewWireLog(dir)
			tapRun(t, l, "p", tc.ask, tc.answer)
			require.NoError(t, l.Close())
			recs := wireRecords(t, filepath.Join(dir, "p.wire.jsonl"))
			require.Len(t, recs, 2)
			ans := recs[1]
			assert.NotContains(t, string(ans.Message)+ans.Text, "SSS")
			assert.NotContains(t, string(ans.Message)+ans.Text, "hunter2")
			if tc.want == "message" {
				assert.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":"[redacted]"}`, string(ans.Message))
			} else {
				assert.Equal(t, wireRedacted, ans.Text)
				assert.Equal(t, len(tc.answer)-1, ans.Truncated)
			}
		})
	}
}

// TestWireLogBounds: a line over WireLogLineBytes keeps its prefix and
// its length; a file stops at its bound with one record saying so, and a
// restart's tap appends to the same file under the same bound.
func TestWireLogBounds(t *testing.T) {
	dir := t.TempDir()
	l := NewWireLog(dir)
	long := strings.Repeat("x", WireLogLineBytes+100)
	tapRun(t, l, "p", long+"\n")
	recs := wireRecords(t, filepath.Join(dir, "p.wire.jsonl"))
	require.Len(t, recs, 1)
	assert.Equal(t, WireLogLineBytes+100, recs[0].Truncated)
	assert.Len(t, recs[0].Text, WireLogLineBytes)

	// A flood: far more than the file's bound, over two processes.
	flood := strings.Repeat(strings.Repeat("y", 1000)+"\n", WireLogFileBytes/1000)
	tapRun(t, l, "p", flood)
	tapRun(t, l, "p", flood)
	require.NoError(t, l.Close())
	info, err := os.Stat(filepath.Join(dir, "p.wire.jsonl"))
	require.NoError(t, err)
	assert.LessOrEqual(t, info.Size(), int64(WireLogFileBytes))
	recs = wireRecords(t, filepath.Join(dir, "p.wire.jsonl"))
	assert.True(t, recs[len(recs)-1].Full, "the last record says the file is full")
	for _, r := range recs[:len(recs)-1] {
		assert.False(t, r.Full)
	}

	// A new daemon on the same state appends nothing to a full file.
	l2 := NewWireLog(dir)
	tapRun(t, l2, "p", "after\n")
	require.NoError(t, l2.Close())
	info2, err := os.Stat(filepath.Join(dir, "p.wire.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, info.Size(), info2.Size())
}

// TestWireLogRedactsWebhooksAndConfigs: a webhook.handle keeps its
// method, its registered path, its header names, its query's keys, the
// values of the allowed headers and its body, and nothing else of its
// path, headers or query; a configure's and a validate's secret reference
// text is redacted wherever it is; a request of another shape than the
// protocol's loses the member rather than logging it.
func TestWireLogRedactsWebhooksAndConfigs(t *testing.T) {
	for name, tc := range map[string]struct{ request, want string }{
		"a webhook": {
			`{"jsonrpc":"2.0","id":1,"method":"webhook.handle","params":{"method":"POST","path":"/schedule/home/jobs/tick/hunter2-token","webhook_path":"/schedule/home/jobs","query":"sig=hunter2-q&flag","headers":{"Authorization":["Bearer hunter2-auth"],"X-Notes-Signature":["sha256=hunter2"],"Content-Type":["application/json"],"User-Agent":["curl"]},"body":"e30="}}`,
			`{"jsonrpc":"2.0","id":1,"method":"webhook.handle","params":{"method":"POST","path":"/schedule/home/jobs/[redacted]","webhook_path":"/schedule/home/jobs","query":"sig=[redacted]\u0026flag","headers":{"Authorization":["[redacted]"],"X-Notes-Signature":["[redacted]"],"Content-Type":["application/json"],"User-Agent":["curl"]},"body":"e30="}}`,
		},
		"the registered path itself": {
			`{"jsonrpc":"2.0","id":1,"method":"webhook.handle","params":{"path":"/notes/team/inbox","webhook_path":"/notes/team/inbox"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"webhook.handle","params":{"path":"/notes/team/inbox","webhook_path":"/notes/team/inbox"}}`,
		},
		"a path not under its prefix": {
			`{"jsonrpc":"2.0","id":1,"method":"webhook.handle","params":{"path":"/notes/teamhunter2","webhook_path":"/notes/team"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"webhook.handle","params":{"path":"[redacted]","webhook_path":"/notes/team"}}`,
		},
		"members of another shape": {
			`{"jsonrpc":"2.0","id":1,"method":"webhook.handle","params":{"path":["hunter2"],"webhook_path":7,"query":{"a":"hunter2"},"headers":"hunter2"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"webhook.handle","params":{"path":"[redacted]","webhook_path":"[redacted]","query":"[redacted]","headers":"[redacted]"}}`,
		},
		"a configure": {
			`{"jsonrpc":"2.0","id":2,"method":"configure","params":{"connections":[{"name":"hook","config":{"url":"https://x","key":"env:HUNTER2","nested":["FILE:/hunter2"]}}],"generation":3}}`,
			`{"jsonrpc":"2.0","id":2,"method":"configure","params":{"connections":[{"name":"hook","config":{"url":"https://x","key":"[redacted]","nested":["[redacted]"]}}],"generation":3}}`,
		},
		"a validate": {
			`{"jsonrpc":"2.0","id":3,"method":"validate","params":{"kind":"connection","config":{"token":"env:HUNTER2"},"secret_names":["token"]}}`,
			`{"jsonrpc":"2.0","id":3,"method":"validate","params":{"kind":"connection","config":{"token":"[redacted]"},"secret_names":["token"]}}`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l := NewWireLog(dir)
			_, gotIn := tapRun(t, l, "p", "", tc.request+"\n")
			require.NoError(t, l.Close())
			assert.Equal(t, tc.request+"\n", gotIn, "the package gets the request unchanged")
			recs := wireRecords(t, filepath.Join(dir, "p.wire.jsonl"))
			require.Len(t, recs, 1)
			assert.JSONEq(t, tc.want, string(recs[0].Message))
			assert.NotContains(t, strings.ToLower(string(recs[0].Message)), "hunter2")
		})
	}
}

// FuzzWireTap feeds the tap what a package might write, then the daemon's
// answer to a secret.resolve it asked with that id, then the same bytes as
// the daemon's own lines: whatever either side wrote passes on unchanged,
// the log stays JSON lines, and the secret in the answer never reaches
// the log.
func FuzzWireTap(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"method":"secret.resolve","params":{}}`+"\n"), "7")
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","method":"secret.resolve"}`+"\n"+`{"id":"a","result":1}`+"\n"), `"a"`)
	f.Add([]byte("not json\n{\"id\":"), "1")
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"secret.resolve"}]`+"\n"), "1")
	// The daemon's own requests pass the same tap: a webhook and a
	// configure the package echoes back, well formed or not.
	f.Add([]byte(`{"jsonrpc":"2.0","id":9,"method":"webhook.handle","params":{"path":"/p/x/zq-fuzz-secret-value","webhook_path":"/p","query":"a=1&b","headers":{"Authorization":["x"]}}}`+"\n"), "9")
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"method":"configure","params":{"connections":[{"config":{"k":"env:X"}}]}}`+"\n"), "3")
	f.Add([]byte(`{"jsonrpc":"2.0","id":4,"method":"webhook.handle","params":{"path":7,"headers":[1],"query":null}}`+"\n"), "4")
	f.Fuzz(func(t *testing.T, fromExt []byte, id string) {
		const secret = "zq-fuzz-secret-value"
		dir := t.TempDir()
		l := NewWireLog(dir)
		ask := `{"jsonrpc":"2.0","id":` + id + `,"method":"secret.resolve","params":{}}` + "\n"
		if !json.Valid([]byte(strings.TrimSpace(ask))) || strings.ContainsAny(id, "\n\r") {
			t.Skip("the host answers no secret to a request it cannot read")
		}
		stdin := &nopWriteCloser{}
		r, w := l.Tap("p")(io.NopCloser(io.MultiReader(bytes.NewReader(fromExt), strings.NewReader("\n"+ask))), stdin)
		out, err := io.ReadAll(r)
		require.NoError(t, err)
		assert.Equal(t, string(fromExt)+"\n"+ask, string(out))
		answer := `{"jsonrpc":"2.0","id":` + id + `,"result":{"values":{"k":"` + secret + `"}}}` + "\n"
		_, err = w.Write([]byte(answer))
		require.NoError(t, err)
		// The same bytes as the daemon's own lines (a webhook.handle, a
		// configure): redacted in the log, passed on unchanged.
		_, err = w.Write(append(append([]byte(nil), fromExt...), '\n'))
		require.NoError(t, err)
		assert.Equal(t, answer+string(fromExt)+"\n", stdin.String())
		require.NoError(t, l.Close())
		data, err := os.ReadFile(filepath.Join(dir, "p.wire.jsonl"))
		require.NoError(t, err)
		if !bytes.Contains(fromExt, []byte(secret)) && !strings.Contains(id, secret) {
			assert.NotContains(t, string(data), secret)
		}
		for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
			assert.True(t, json.Valid(line), "%q", line)
		}
	})
}
