package daemon

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// The wire log (serve --test-wire-log) records every line between the
// daemon and each package, both directions, as JSON lines in
// <state>/logs/extensions/<name>.wire.jsonl, for a test's failure
// evidence. It is for tests: it writes every message to disk.
//
// Bounds, so a flooding package cannot fill the disk: a line is kept up
// to WireLogLineBytes (a longer one is recorded as its prefix, as text,
// with its full length in "truncated"), and a file stops growing once it
// reaches WireLogFileBytes, with one last record saying so ("full").
//
// The result of every secret.resolve the daemon answers, and the
// toolbelt token of a run it starts (params.token of executor.run,
// executor.recover and executor.resume), are written as "[redacted]": the
// log holds no secret value and no credential. A webhook.handle keeps its
// method, its registered path (webhook_path, and path up to it), its
// header names, its query's keys and its body; the rest of its path
// (schedule's trigger token is a path segment), every header value but
// those in wireHeaderAllow (a signature, an Authorization) and every
// query value are "[redacted]". In a configure's or a validate's params
// every string that reads as a secret reference (env:…, file:…) is
// "[redacted]" too, wherever it is.
const (
	WireLogLineBytes = 64 << 10
	WireLogFileBytes = 16 << 20
)

// WireRecord is one line of a wire log (its type is client's, which a
// test reads it with).
type WireRecord = client.WireLogRecord

// wireParseBytes is the longest line the log reads whole: the longest
// the host's JSON-RPC connection takes (jsonrpc.DefaultMaxMessageBytes),
// so no request it acts on escapes the redaction.
const wireParseBytes = jsonrpc.DefaultMaxMessageBytes + 1

// Wire log directions.
const (
	WireToExtension   = client.WireToExtension
	WireFromExtension = client.WireFromExtension
)

// wireRedacted replaces a secret.resolve result in the log.
const wireRedacted = `"[redacted]"`

// maxPendingSecretIDs bounds the secret.resolve requests a process may
// have unanswered before every answer to it is redacted.
const maxPendingSecretIDs = 1024

// WireLog writes the wire logs of a daemon's packages. Its Tap is
// Options.Wire.
type WireLog struct {
	dir   string
	mu    sync.Mutex
	files map[string]*wireFile
}

// NewWireLog is a wire log writing into dir (logs/extensions under the
// state directory: WireLogPath).
func NewWireLog(dir string) *WireLog {
	return &WireLog{dir: dir, files: map[string]*wireFile{}}
}

// WireLogPath is where the wire log of package name goes.
func WireLogPath(stateDir, name string) string {
	return filepath.Join(LogDir(stateDir), "extensions", name+client.WireLogSuffix)
}

// Tap is Options.Wire: each process of pkg gets its own tap over the
// package's one file, which its restarts append to.
func (l *WireLog) Tap(pkg string) func(io.ReadCloser, io.WriteCloser) (io.ReadCloser, io.WriteCloser) {
	return func(stdout io.ReadCloser, stdin io.WriteCloser) (io.ReadCloser, io.WriteCloser) {
		t := &wireTap{file: l.file(pkg), pending: map[string]bool{}}
		return &wireReader{tap: t, r: stdout}, &wireWriter{tap: t, w: stdin}
	}
}

// Close closes every file.
func (l *WireLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first error
	for name, f := range l.files {
		if err := f.close(); err != nil && first == nil {
			first = err
		}
		delete(l.files, name)
	}
	return first
}

func (l *WireLog) file(pkg string) *wireFile {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.files[pkg]
	if !ok {
		f = &wireFile{path: filepath.Join(l.dir, pkg+client.WireLogSuffix), limit: WireLogFileBytes}
		l.files[pkg] = f
	}
	return f
}

// wireFile is one package's log, opened at its first record.
type wireFile struct {
	path   string
	limit  int64
	mu     sync.Mutex
	f      *os.File
	size   int64
	full   bool
	failed bool // opening or writing failed: the log is given up
}

func (w *wireFile) write(rec WireRecord) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.full || w.failed {
		return
	}
	if w.f == nil {
		if err := os.MkdirAll(filepath.Dir(w.path), 0o700); err != nil {
			w.failed = true
			return
		}
		f, err := os.OpenFile(w.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			w.failed = true
			return
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			w.failed = true
			return
		}
		w.f, w.size = f, info.Size()
		if w.size >= w.limit-256 || endsFull(f, w.size) {
			// An earlier daemon filled it and said so.
			w.full = true
			return
		}
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return
	}
	line = append(line, '\n')
	// Keep room for the last record saying the file is full.
	if w.size+int64(len(line)) > w.limit-256 {
		w.full = true
		line, _ = json.Marshal(WireRecord{Time: rec.Time, Full: true})
		line = append(line, '\n')
	}
	n, err := w.f.Write(line)
	w.size += int64(n)
	if err != nil {
		w.failed = true
	}
}

// endsFull reports whether the file's last record is the one saying it
// is full.
func endsFull(f *os.File, size int64) bool {
	const tail = 128
	if size == 0 {
		return false
	}
	buf := make([]byte, min(size, tail))
	if _, err := f.ReadAt(buf, size-int64(len(buf))); err != nil {
		return false
	}
	buf = bytes.TrimRight(buf, "\n")
	last := buf[bytes.LastIndexByte(buf, '\n')+1:]
	var rec WireRecord
	return json.Unmarshal(last, &rec) == nil && rec.Full
}

func (w *wireFile) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// wireTap is one process's recorder: it splits each direction into lines
// and tracks the secret.resolve requests the package has made, so their
// answers are redacted.
type wireTap struct {
	file *wireFile

	mu         sync.Mutex
	pending    map[string]bool // ids of unanswered secret.resolve requests
	overflowed bool            // too many pending: redact every answer
}

// lineBuffer gathers one direction's bytes into lines, keeping at most
// wireParseBytes of each: a line is read whole (as the peer reads it) to
// be redacted, then cut to WireLogLineBytes as it is logged.
type lineBuffer struct {
	buf []byte
	n   int // the current line's full length so far
}

// feed splits p into lines, calling emit for each complete one.
func (b *lineBuffer) feed(p []byte, emit func(line []byte, length int)) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := wireParseBytes - len(b.buf); room > 0 {
			b.buf = append(b.buf, chunk[:min(room, len(chunk))]...)
		}
		b.n += len(chunk)
		if i < 0 {
			return
		}
		emit(b.buf, b.n)
		b.buf, b.n = b.buf[:0], 0
		p = p[i+1:]
	}
}

// flush emits a last line the stream ended without a newline.
func (b *lineBuffer) flush(emit func(line []byte, length int)) {
	if b.n > 0 {
		emit(b.buf, b.n)
		b.buf, b.n = b.buf[:0], 0
	}
}

// wireEnvelope is what the redaction reads of a message.
type wireEnvelope struct {
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
	Result json.RawMessage `json:"result"`
	Params json.RawMessage `json:"params"`
}

// record writes one line of a direction.
func (t *wireTap) record(direction string, line []byte, length int) {
	line = bytes.TrimRight(line, "\r")
	if length == 0 {
		return
	}
	rec := WireRecord{Time: time.Now().UTC(), Direction: direction}
	truncated := length > len(line)
	var env wireEnvelope
	isObject := !truncated && len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &env) == nil
	t.mu.Lock()
	switch {
	case direction == WireFromExtension && isObject && env.Method != nil && *env.Method == "secret.resolve" && len(env.ID) > 0:
		if len(t.pending) >= maxPendingSecretIDs {
			t.overflowed = true
		} else {
			t.pending[idKey(env.ID)] = true
		}
	case direction == WireToExtension && !isObject && (len(t.pending) > 0 || t.overflowed):
		// An answer it cannot read while a secret is owed: keep nothing
		// of it.
		t.mu.Unlock()
		rec.Text, rec.Truncated = wireRedacted, length
		t.file.write(rec)
		return
	case direction == WireToExtension && env.Method != nil && wireRedactsParams(*env.Method):
		// A webhook's path, query and headers carry its token or its
		// signature; a configure's or validate's config may carry
		// secret reference text.
		red, err := redactParams(line, *env.Method, env.Params)
		if err != nil {
			t.mu.Unlock()
			rec.Text, rec.Truncated = wireRedacted, length
			t.file.write(rec)
			return
		}
		line = red
	case direction == WireToExtension && env.Method != nil && bytes.Contains(env.Params, []byte(`"token"`)):
		// executor.run, .recover and .resume hand the run its toolbelt
		// token: a bearer credential, kept out like a secret.
		red, err := redactParamsToken(line, env.Params)
		if err != nil {
			t.mu.Unlock()
			rec.Text, rec.Truncated = wireRedacted, length
			t.file.write(rec)
			return
		}
		line = red
	case direction == WireToExtension && env.Method == nil && len(env.ID) > 0:
		key := idKey(env.ID)
		if t.pending[key] || t.overflowed {
			delete(t.pending, key)
			if len(env.Result) > 0 {
				if red, err := redactResult(line); err == nil {
					line = red
				} else {
					t.mu.Unlock()
					rec.Text, rec.Truncated = wireRedacted, length
					t.file.write(rec)
					return
				}
			}
		}
	}
	t.mu.Unlock()
	out := line
	if isObject {
		var compact bytes.Buffer
		if json.Compact(&compact, line) == nil {
			out = compact.Bytes()
		}
	}
	switch {
	case truncated || len(out) > WireLogLineBytes:
		rec.Text, rec.Truncated = string(out[:min(len(out), WireLogLineBytes)]), len(out)
		if truncated {
			rec.Truncated = length // what was read was only the line's start
		}
	case isObject:
		rec.Message = out
	default:
		rec.Text = string(out)
	}
	t.file.write(rec)
}

// redactResult is the response line with its result replaced.
func redactResult(line []byte) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return nil, err
	}
	fields["result"] = json.RawMessage(wireRedacted)
	return json.Marshal(fields)
}

// redactParamsToken is the request line with params.token replaced.
func redactParamsToken(line []byte, params json.RawMessage) ([]byte, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, err
	}
	if _, ok := p["token"]; !ok {
		return line, nil
	}
	p["token"] = json.RawMessage(wireRedacted)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return nil, err
	}
	var err error
	if fields["params"], err = json.Marshal(p); err != nil {
		return nil, err
	}
	return json.Marshal(fields)
}

// idKey is an id in one spelling, so 7 and 7.0 or " 7" do not differ by
// their bytes.
func idKey(id json.RawMessage) string {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return string(id)
	}
	canon, _ := json.Marshal(v)
	return string(canon)
}

// wireReader records what the package writes as it passes it on unchanged.
type wireReader struct {
	tap  *wireTap
	r    io.ReadCloser
	line lineBuffer
	done bool
}

func (r *wireReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	emit := func(line []byte, length int) { r.tap.record(WireFromExtension, line, length) }
	r.line.feed(p[:n], emit)
	if err != nil && !r.done {
		r.done = true
		r.line.flush(emit)
	}
	return n, err
}

func (r *wireReader) Close() error { return r.r.Close() }

// wireWriter records what the daemon writes before passing it on.
type wireWriter struct {
	tap  *wireTap
	w    io.WriteCloser
	mu   sync.Mutex
	line lineBuffer
}

func (w *wireWriter) Write(p []byte) (int, error) {
	// Held across the write too, so the log's order is the pipe's.
	w.mu.Lock()
	defer w.mu.Unlock()
	w.line.feed(p, func(line []byte, length int) { w.tap.record(WireToExtension, line, length) })
	return w.w.Write(p)
}

func (w *wireWriter) Close() error { return w.w.Close() }

// wireHeaderAllow are the webhook headers whose values the wire log
// keeps: they describe the body, never authenticate it.
var wireHeaderAllow = map[string]bool{
	"Accept": true, "Content-Encoding": true, "Content-Length": true, "Content-Type": true, "User-Agent": true,
}

// wireRedactedText is wireRedacted's text.
const wireRedactedText = "[redacted]"

// wireRedactsParams names the requests whose params redactParams edits.
func wireRedactsParams(method string) bool {
	return method == "webhook.handle" || method == "configure" || strings.HasPrefix(method, "validate")
}

// redactParams is the request line with its params redacted for method.
func redactParams(line []byte, method string, params json.RawMessage) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return nil, err
	}
	if len(params) == 0 || string(params) == "null" {
		return line, nil
	}
	var red any
	if method == "webhook.handle" {
		var p map[string]json.RawMessage
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		if err := redactWebhook(p); err != nil {
			return nil, err
		}
		red = p
	} else {
		var p any
		dec := json.NewDecoder(bytes.NewReader(params))
		dec.UseNumber()
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		red = redactSecretRefs(p)
	}
	var err error
	if fields["params"], err = json.Marshal(red); err != nil {
		return nil, err
	}
	return json.Marshal(fields)
}

// redactWebhook edits webhook.handle's params in place. A member of
// another shape than the protocol's is redacted whole.
func redactWebhook(p map[string]json.RawMessage) error {
	var prefix string
	if raw, ok := p["webhook_path"]; ok && json.Unmarshal(raw, &prefix) != nil {
		p["webhook_path"], prefix = json.RawMessage(wireRedacted), ""
	}
	if raw, ok := p["path"]; ok {
		var path string
		if json.Unmarshal(raw, &path) != nil {
			path = ""
		}
		p["path"] = mustJSON(redactWebhookPath(path, prefix))
	}
	if raw, ok := p["query"]; ok {
		var q string
		if json.Unmarshal(raw, &q) != nil {
			p["query"] = json.RawMessage(wireRedacted)
		} else {
			p["query"] = mustJSON(redactQuery(q))
		}
	}
	if raw, ok := p["headers"]; ok {
		var h map[string][]string
		if json.Unmarshal(raw, &h) != nil {
			p["headers"] = json.RawMessage(wireRedacted)
		} else {
			for name, vs := range h {
				if wireHeaderAllow[http.CanonicalHeaderKey(name)] {
					continue
				}
				for i := range vs {
					vs[i] = wireRedactedText
				}
			}
			p["headers"] = mustJSON(h)
		}
	}
	return nil
}

// redactWebhookPath keeps path up to the registered prefix (at a segment
// boundary) and redacts the rest; a path not under it is redacted whole.
func redactWebhookPath(path, prefix string) string {
	prefix = strings.TrimSuffix(prefix, "/")
	switch {
	case prefix != "" && path == prefix:
		return path
	case prefix != "" && strings.HasPrefix(path, prefix+"/"):
		if path == prefix+"/" {
			return path
		}
		return prefix + "/" + wireRedactedText
	}
	return wireRedactedText
}

// redactQuery keeps a raw query's keys and redacts every value.
func redactQuery(q string) string {
	if q == "" {
		return q
	}
	parts := strings.Split(q, "&")
	for i, kv := range parts {
		if k, _, ok := strings.Cut(kv, "="); ok {
			parts[i] = k + "=" + wireRedactedText
		}
	}
	return strings.Join(parts, "&")
}

// redactSecretRefs replaces every string in v that reads as a secret
// reference.
func redactSecretRefs(v any) any {
	switch v := v.(type) {
	case string:
		if looksLikeSecretRef(v) {
			return wireRedactedText
		}
	case []any:
		for i := range v {
			v[i] = redactSecretRefs(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = redactSecretRefs(v[k])
		}
	}
	return v
}

// looksLikeSecretRef: a reference's schemes (secrets.go), case aside.
func looksLikeSecretRef(s string) bool {
	s = strings.ToLower(strings.TrimSpace(s))
	return strings.HasPrefix(s, "env:") || strings.HasPrefix(s, "file:")
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(wireRedacted)
	}
	return b
}
