package invoke

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// Response is a successful call's answer.
type Response struct {
	// Method is the method called.
	Method string `json:"method"`
	// ProtocolVersion is the version the extension chose in initialize.
	ProtocolVersion protocol.Version `json:"protocol_version"`
	// Result is the call's result: strict JSON, its shape unchecked (the
	// caller knows the method).
	Result json.RawMessage `json:"result"`
	// StdoutBytes and StderrBytes count what the extension wrote on each
	// stream. Past its limit a stream is counted to the first excess byte
	// only.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
}

// Invoke runs the package in req.Dir for exactly one call, without a
// daemon: initialize, an empty configure, req.Method with req.Params,
// shutdown, then the process's exit, all within lim. It then cleans up,
// whatever happened: SIGKILL to the process group, the process reaped and
// the pipes drained within the cleanup budget, the temporary directory
// removed.
//
// Every failure is an *Error with a fixed code (see Codes); a cleanup
// failure after another failure is reported as that error's Cleanup, and
// errors.Is finds both. On success the Response holds the result; with a
// cleanup failure after a successful call it is returned with the error.
func Invoke(ctx context.Context, req Request, lim Limits) (Response, error) {
	if err := lim.Validate(); err != nil {
		return Response{}, err
	}
	p, err := prepare(req)
	if err != nil {
		return Response{}, err
	}
	if ctx.Err() != nil {
		return Response{}, newError(CodeCancelled, "the invocation was cancelled before the launch")
	}
	tmp, err := os.MkdirTemp("", "open-conduit-invoke-")
	if err != nil {
		return Response{}, newError(CodePrerequisiteMissing, "no temporary directory could be made")
	}
	resp, primary := run(ctx, req, lim, p, tmp)
	var cleanup *Error
	if primary != nil {
		cleanup = primary.Cleanup
	}
	if err := os.RemoveAll(tmp); err != nil {
		cleanup = joinCleanup(cleanup, "the temporary directory could not be removed")
	}
	switch {
	case primary != nil:
		primary.Cleanup = cleanup
		return resp, primary
	case cleanup != nil:
		return resp, cleanup
	}
	return resp, nil
}

func joinCleanup(e *Error, what string) *Error {
	if e == nil {
		return newError(CodeCleanupFailed, what)
	}
	e.Message += "; " + what
	return e
}

// messages are the four requests of an invocation, encoded.
type messages struct {
	initialize, configure, call, shutdown []byte
}

// encode builds the requests and holds each to max_request_bytes.
func encode(p *plan, req Request, tmp string, lim Limits) (messages, *Error) {
	init := protocol.InitializeParams{
		ProtocolVersions: protocol.SupportedVersions(),
		Host:             protocol.HostInfo{Name: hostName, Version: req.HostVersion},
		StateDir:         filepath.Join(tmp, "state"),
	}
	for _, e := range p.manifest.Provides.Executors {
		if init.ExecutorDirs == nil {
			init.ExecutorDirs = map[string]string{}
		}
		init.ExecutorDirs[e.Name] = filepath.Join(tmp, "executors", e.Name)
	}
	// The empty configuration, with the KV layout read as current: there
	// is no store to migrate.
	conf := protocol.ConfigureParams{
		Entries: []protocol.ConfigEntry{}, Connections: []protocol.Connection{},
		KV: protocol.KVLayout{Stored: p.manifest.KVVersion, Declared: p.manifest.KVVersion},
	}
	var m messages
	var err error
	enc := func(id int64, method string, params any) []byte {
		if err != nil {
			return nil
		}
		var b []byte
		b, err = json.Marshal(struct {
			JSONRPC string `json:"jsonrpc"`
			ID      int64  `json:"id"`
			Method  string `json:"method"`
			Params  any    `json:"params"`
		}{"2.0", id, method, params})
		return append(b, '\n')
	}
	m.initialize = enc(idInitialize, "initialize", init)
	m.configure = enc(idConfigure, "configure", conf)
	m.call = enc(idCall, req.Method, p.params)
	m.shutdown = enc(idShutdown, "shutdown", struct{}{})
	if err != nil {
		return messages{}, newError(CodeInvalidInvocation, "a request could not be encoded")
	}
	for _, b := range [][]byte{m.initialize, m.configure, m.call, m.shutdown} {
		if int64(len(b)) > lim.MaxRequestBytes {
			e := newError(CodeSizeLimit, "a request is larger than max_request_bytes; nothing was started")
			e.Stream = StreamRequest
			return messages{}, e
		}
	}
	for _, d := range []string{"work", "state"} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o700); err != nil {
			return messages{}, newError(CodePrerequisiteMissing, "the temporary directory could not be prepared")
		}
	}
	return m, nil
}

// The ids of the four requests, in the order they are sent.
const (
	idInitialize int64 = iota + 1
	idConfigure
	idCall
	idShutdown
)

func run(ctx context.Context, req Request, lim Limits, p *plan, tmp string) (Response, *Error) {
	msgs, e := encode(p, req, tmp, lim)
	if e != nil {
		return Response{}, e
	}
	progress := req.Progress
	if progress == nil {
		progress = func(string) {}
	}
	progress("launch")
	s, e := start(p, req.Env, filepath.Join(tmp, "work"), lim)
	if e != nil {
		return Response{}, e
	}
	stopCancel := context.AfterFunc(ctx, func() {
		s.abort(newError(CodeCancelled, "the invocation was cancelled"))
	})
	wall := time.AfterFunc(lim.wallTime(), func() {
		s.abort(newError(CodeTimeout, "the invocation did not end within wall_time_ms"))
	})
	resp, e := s.exchange(p, req.Method, msgs, progress)
	wall.Stop()
	stopCancel()
	progress("cleanup")
	resp.StdoutBytes, resp.StderrBytes = s.stdoutN.Load(), s.stderrN.Load()
	detached, cleanup := s.cleanup(lim.cleanupTime())
	if e != nil {
		// A result counts only from an exchange that ended well: an
		// answer followed by a failed shutdown or exit is not accepted.
		resp.Result = nil
		e.Detached = detached
		e.Cleanup = cleanup
		return resp, e
	}
	if cleanup != nil {
		return resp, cleanup
	}
	return resp, nil
}

// exchange sends the four requests in turn and waits for the process to
// exit and both streams to end.
func (s *session) exchange(p *plan, method string, msgs messages, progress func(string)) (Response, *Error) {
	resp := Response{Method: method}
	progress("initialize")
	raw, e := s.roundTrip(msgs.initialize, idInitialize, "initialize")
	if e != nil {
		return resp, e
	}
	if resp.ProtocolVersion, e = checkInitialize(p.manifest, raw); e != nil {
		return resp, e
	}
	progress("configure")
	raw, e = s.roundTrip(msgs.configure, idConfigure, "configure")
	if e != nil {
		return resp, e
	}
	var conf protocol.ConfigureResult
	if err := decodeResult(raw, &conf); err != nil {
		return resp, newError(CodeProtocolInvalid, "the configure answer is not a configure result")
	}
	progress("call")
	if resp.Result, e = s.roundTrip(msgs.call, idCall, "the call"); e != nil {
		return resp, e
	}
	progress("shutdown")
	if _, e = s.roundTrip(msgs.shutdown, idShutdown, "shutdown"); e != nil {
		return resp, e
	}
	return resp, s.finish()
}

// checkInitialize checks the initialize answer as the host does: a
// version both sides speak and the manifest the package's file holds.
func checkInitialize(m *protocol.Manifest, raw json.RawMessage) (protocol.Version, *Error) {
	var res protocol.InitializeResult
	if err := decodeResult(raw, &res); err != nil {
		return 0, newError(CodeProtocolInvalid, "the initialize answer is not an initialize result")
	}
	if !protocol.Supported(res.ProtocolVersion) || !slices.Contains(m.Protocol, res.ProtocolVersion) {
		return 0, newError(CodeProtocolInvalid, "the extension chose a protocol version the host or its manifest does not list")
	}
	got, err := protocol.DecodeManifest(res.Manifest)
	if err != nil || !reflect.DeepEqual(got, m) {
		return 0, newError(CodeProtocolInvalid, "the manifest the extension answered with differs from "+protocol.ManifestFile)
	}
	return res.ProtocolVersion, nil
}

// decodeResult decodes a result with no unknown member and every member
// name exact.
func decodeResult(raw json.RawMessage, v any) error { return decodeExact(raw, v) }
