package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/prototypes/transport/workload"
	"github.com/open-conduit/open-conduit/prototypes/transport/workload/overjsonrpc"
	"github.com/open-conduit/open-conduit/prototypes/transport/workload/overplugin"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// session is the host's end of one running extension, whatever carries it.
// Errors are the workload's: *workload.Authored, workload.ErrUnknownMethod,
// workload.ErrInternal, workload.ErrBroken, context.Canceled.
type session interface {
	// call makes one call of an extension-side method.
	call(ctx context.Context, method string, params, result any) error
	// upload moves total bytes of workload.Data(total, seed) in acknowledged
	// chunks and returns what the receiving end committed.
	upload(ctx context.Context, total, chunk int, seed byte) (workload.CommitResult, error)
	// hostCallbacks is how many host callbacks the host has served.
	hostCallbacks() int64
	// pushed is what the extension's pushes left on the host.
	pushed(ctx context.Context) ([]string, error)
	// pid is the extension process's, 0 when unknown.
	pid() int
	close() error
}

// transport starts sessions of one binary.
type transport struct {
	name   string
	binary string // built by main
	// start launches the binary and completes the handshake offering
	// versions; a refusal returns the error and no session.
	start func(ctx context.Context, bin string, versions []int) (session, error)
	// restarts says the host supervises the process: after a crash the
	// same session serves again once the process is restarted.
	restarts bool
	// floor marks the raw pipe: it carries echoes and chunks only, and
	// runs no semantic check.
	floor bool
}

// ---- bare protocol/jsonrpc ----

type jsonrpcSession struct {
	cmd    *exec.Cmd
	conn   *jsonrpc.Conn
	echoes atomic.Int64
	mu     sync.Mutex
	pushes []string
}

// extensionLog receives every extension's stderr (main points it at a file).
var extensionLog io.Writer = io.Discard

// startProcess runs bin with pipes on its stdio (stderr to extensionLog), grown as
// the host grows its extensions' pipes.
func startProcess(bin string) (*exec.Cmd, *os.File, *os.File, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, nil, err
	}
	growPipe(inW)
	growPipe(outR)
	cmd := exec.Command(bin)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, extensionLog
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, nil, nil, err
	}
	return cmd, outR, inW, nil
}

func startJSONRPC(ctx context.Context, bin string, versions []int) (session, error) {
	cmd, out, in, err := startProcess(bin)
	if err != nil {
		return nil, err
	}
	s := &jsonrpcSession{cmd: cmd}
	s.conn = jsonrpc.NewConn(out, in, jsonrpc.Methods{
		workload.MethodHostEcho: func(_ context.Context, req *jsonrpc.Request) (any, error) {
			s.echoes.Add(1)
			return req.Params, nil
		},
		workload.MethodHostPush: func(_ context.Context, req *jsonrpc.Request) (any, error) {
			var in workload.PushParams
			if err := req.DecodeParams(&in); err != nil {
				return nil, err
			}
			s.mu.Lock()
			s.pushes = append(s.pushes, in.Value)
			s.mu.Unlock()
			return workload.PushAnswer{Ack: in.Value + " received"}, nil
		},
	}, &jsonrpc.Options{DecodeError: overjsonrpc.DecodeError, Eager: func(string) bool { return true }})
	var res workload.InitializeResult
	if err := s.call(ctx, workload.MethodInitialize, workload.InitializeParams{ProtocolVersions: versions}, &res); err != nil {
		_ = s.close()
		return nil, err
	}
	if res.ProtocolVersion != workload.Version {
		_ = s.close()
		return nil, fmt.Errorf("initialize agreed on version %d", res.ProtocolVersion)
	}
	return s, nil
}

func (s *jsonrpcSession) call(ctx context.Context, method string, params, result any) error {
	return jsonrpcErr(s.conn.Call(ctx, method, params, result))
}

// jsonrpcErr maps the transport's errors onto the workload's.
func jsonrpcErr(err error) error {
	var je *jsonrpc.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jsonrpc.ErrTransport):
		return fmt.Errorf("%w: %v", workload.ErrBroken, err)
	case errors.As(err, &je) && je.Code == jsonrpc.CodeMethodNotFound:
		return fmt.Errorf("%w: %s", workload.ErrUnknownMethod, je.Message)
	case errors.As(err, &je) && je.Code == jsonrpc.CodeInternal:
		return workload.ErrInternal
	}
	return err
}

func (s *jsonrpcSession) upload(ctx context.Context, total, chunk int, seed byte) (workload.CommitResult, error) {
	return uploadChunks(ctx, s.call, total, chunk, seed)
}

// uploadChunks is the host-to-extension upload of bare JSON-RPC and
// go-plugin: one acknowledged call per chunk, then a commit.
func uploadChunks(ctx context.Context, call func(context.Context, string, any, any) error, total, chunk int, seed byte) (workload.CommitResult, error) {
	data, digest := workload.Data(total, seed)
	name := fmt.Sprintf("upload-%d", time.Now().UnixNano())
	start := time.Now()
	for off := 0; off < total; off += chunk {
		var ack workload.ChunkAck
		end := min(off+chunk, total)
		if err := call(ctx, workload.MethodChunk, workload.ChunkParams{Upload: name, Offset: int64(off), Data: data[off:end]}, &ack); err != nil {
			return workload.CommitResult{}, fmt.Errorf("chunk at %d: %w", off, err)
		}
		if ack.Bytes != int64(end) {
			return workload.CommitResult{}, fmt.Errorf("chunk at %d acknowledged %d bytes, want %d", off, ack.Bytes, end)
		}
	}
	took := time.Since(start)
	var res workload.CommitResult
	err := call(ctx, workload.MethodChunkCommit, workload.CommitParams{Upload: name, Bytes: int64(total), SHA256: digest}, &res)
	res.ChunksNanos = int64(took)
	return res, err
}

func (s *jsonrpcSession) hostCallbacks() int64 { return s.echoes.Load() }

func (s *jsonrpcSession) pid() int { return s.cmd.Process.Pid }

func (s *jsonrpcSession) pushed(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.pushes...), nil
}

func (s *jsonrpcSession) close() error {
	_ = s.conn.Close() // end of input: the extension exits
	return reap(s.cmd)
}

// reap waits for the process, killing it if it lingers.
func reap(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		return <-done
	}
}

// ---- the full stack: host.Process, host.Service, an SDK extension ----

type fullStackSession struct {
	proc *host.Process
	svc  *host.Service
	dir  string
}

// fullStackPackage lays out the package directory of the SDK binary.
func fullStackPackage(bin string) (string, error) {
	root, err := os.MkdirTemp("", "transport-fullstack-")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, protocol.ManifestFile), workload.Manifest, 0o644); err != nil {
		return "", err
	}
	// A hard link: the host refuses a command that is a symbolic link.
	return root, os.Link(bin, filepath.Join(dir, "ext-sdk"))
}

// fullStackStore is the coordination store every full-stack session
// shares, opened once so that a start times the host starting a package,
// not the store's migrations.
var fullStackStore struct {
	once  sync.Once
	dir   string
	store *sqlite.Store
	err   error
}

func sharedStore() (*sqlite.Store, string, error) {
	fullStackStore.once.Do(func() {
		fullStackStore.dir, fullStackStore.err = os.MkdirTemp("", "transport-state-")
		if fullStackStore.err == nil {
			fullStackStore.store, fullStackStore.err = sqlite.Open(fullStackStore.dir)
		}
	})
	return fullStackStore.store, fullStackStore.dir, fullStackStore.err
}

func startFullStack(ctx context.Context, bin string, versions []int) (session, error) {
	if len(versions) != 1 || versions[0] != workload.Version {
		// The host offers its own versions; a refusal is the SDK's, over
		// bare JSON-RPC to the same binary.
		return startJSONRPCInitializeOnly(ctx, bin, versions)
	}
	store, stateDir, err := sharedStore()
	if err != nil {
		return nil, err
	}
	root, err := fullStackPackage(bin)
	if err != nil {
		return nil, err
	}
	pkgs, problems, err := host.Discover(root)
	if err != nil || len(problems) > 0 || len(pkgs) != 1 {
		return nil, fmt.Errorf("discovering the bench package: %v %v", err, problems)
	}
	svc := host.NewService(host.ServiceConfig{Manifest: pkgs[0].Manifest, Store: store, Blobs: store})
	proc, err := host.NewProcess(host.Config{Package: pkgs[0], StateRoot: stateDir, Service: svc, Store: store, HostVersion: "prototype",
		PassEnv: []string{"TRANSPORT_EXT_CPUPROFILE"}})
	if err != nil {
		return nil, err
	}
	if err := proc.Start(ctx); err != nil {
		return nil, err
	}
	return &fullStackSession{proc: proc, svc: svc, dir: root}, nil
}

// startJSONRPCInitializeOnly sends one initialize to bin over bare
// JSON-RPC: the SDK's version refusal.
func startJSONRPCInitializeOnly(ctx context.Context, bin string, versions []int) (session, error) {
	cmd, out, in, err := startProcess(bin)
	if err != nil {
		return nil, err
	}
	conn := jsonrpc.NewConn(out, in, nil, &jsonrpc.Options{DecodeError: decodeProtocol})
	err = jsonrpcErr(conn.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: toVersions(versions), Host: protocol.HostInfo{Name: "prototype", Version: "0"}}, nil))
	_ = conn.Close()
	_ = reap(cmd)
	if err == nil {
		return nil, errors.New("initialize with a foreign version was accepted")
	}
	return nil, err
}

func toVersions(v []int) []protocol.Version {
	out := make([]protocol.Version, len(v))
	for i, x := range v {
		out[i] = protocol.Version(x)
	}
	return out
}

// decodeProtocol maps protocol errors onto the workload's.
func decodeProtocol(code int, message string, data json.RawMessage) error {
	return protocolErr(protocol.DecodeWireError(code, message, data))
}

func protocolErr(err error) error {
	var pe *protocol.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jsonrpc.ErrTransport):
		return fmt.Errorf("%w: %v", workload.ErrBroken, err)
	case errors.Is(err, context.Canceled):
		return context.Canceled
	case errors.Is(err, protocol.ErrMethodNotFound):
		return fmt.Errorf("%w: %v", workload.ErrUnknownMethod, err)
	case errors.Is(err, protocol.ErrInternal):
		return workload.ErrInternal
	case errors.As(err, &pe):
		return &workload.Authored{Code: string(pe.Code), Message: pe.Message}
	}
	return err
}

func (s *fullStackSession) call(ctx context.Context, method string, params, result any) error {
	if method == workload.MethodInitialize {
		return errors.New("the host handshakes itself")
	}
	if method[:6] != "bench." {
		// Not an operation: a method the extension does not serve.
		return protocolErr(s.proc.Call(ctx, method, params, result))
	}
	input, err := json.Marshal(params)
	if err != nil {
		return err
	}
	var res protocol.OperationCallResult
	err = s.proc.Call(ctx, "operation.call", protocol.OperationCallParams{Operation: method, Input: input,
		Authority: protocol.Authority{ScopeID: "bench"}}, &res)
	if err != nil {
		return protocolErr(err)
	}
	if result == nil {
		return nil
	}
	return json.Unmarshal(res.Output, result)
}

func (s *fullStackSession) upload(ctx context.Context, total, chunk int, seed byte) (workload.CommitResult, error) {
	run := s.svc.OpenRun("work-upload", "execution-upload", nil)
	defer s.svc.CloseRun(run.ID)
	var res workload.CommitResult
	err := s.call(ctx, workload.MethodUpload, workload.UploadParams{RunID: run.ID, Bytes: total, Chunk: chunk, Seed: seed}, &res)
	return res, err
}

// hostCallbacks: the full stack's callbacks are counted by the extension.
func (s *fullStackSession) hostCallbacks() int64 { return -1 }

func (s *fullStackSession) pid() int { return s.proc.PID() }

func (s *fullStackSession) pushed(ctx context.Context) ([]string, error) {
	var keys []string
	var res protocol.KVListResult
	if err := s.svc.Call(ctx, "kv.list", protocol.KVListParams{Namespace: workload.KVNamespace}, &res); err != nil {
		return nil, err
	}
	for _, it := range res.Items {
		keys = append(keys, it.Key)
	}
	return keys, nil
}

func (s *fullStackSession) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.proc.Close(ctx)
	os.RemoveAll(s.dir)
	return err
}

// ---- go-plugin over gRPC ----

type pluginSession struct {
	client *plugin.Client
	ext    *overplugin.PluginClient
	echoes atomic.Int64
	mu     sync.Mutex
	pushes []string
}

func startPlugin(ctx context.Context, bin string, versions []int) (session, error) {
	s := &pluginSession{}
	set := plugin.PluginSet{overplugin.PluginName: &overplugin.ExtensionPlugin{
		HostEcho: func(e workload.HostEcho) workload.HostEcho { s.echoes.Add(1); return e },
		HostPush: func(p workload.PushParams) workload.PushAnswer {
			s.mu.Lock()
			s.pushes = append(s.pushes, p.Value)
			s.mu.Unlock()
			return workload.PushAnswer{Ack: p.Value + " received"}
		},
	}}
	vp := map[int]plugin.PluginSet{}
	for _, v := range versions {
		vp[v] = set
	}
	hs := overplugin.Handshake
	hs.ProtocolVersion = 0 // the versions come from VersionedPlugins
	s.client = plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  hs,
		VersionedPlugins: vp,
		Cmd:              exec.Command(bin),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Level: hclog.Off, Output: io.Discard}),
		Stderr:           extensionLog,
	})
	rpc, err := s.client.Client()
	if err != nil {
		s.client.Kill()
		return nil, err
	}
	raw, err := rpc.Dispense(overplugin.PluginName)
	if err != nil {
		s.client.Kill()
		return nil, err
	}
	s.ext = raw.(*overplugin.PluginClient)
	var res workload.InitializeResult
	if err := s.ext.Call(ctx, workload.MethodInitialize, workload.InitializeParams{ProtocolVersions: versions, BrokerID: s.ext.BrokerID()}, &res); err != nil {
		s.client.Kill()
		return nil, err
	}
	return s, nil
}

func (s *pluginSession) call(ctx context.Context, method string, params, result any) error {
	return s.ext.Call(ctx, method, params, result)
}

func (s *pluginSession) upload(ctx context.Context, total, chunk int, seed byte) (workload.CommitResult, error) {
	return uploadChunks(ctx, s.call, total, chunk, seed)
}

func (s *pluginSession) hostCallbacks() int64 { return s.echoes.Load() }

func (s *pluginSession) pid() int {
	if rc := s.client.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

func (s *pluginSession) pushed(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.pushes...), nil
}

func (s *pluginSession) close() error {
	s.client.Kill()
	return nil
}

// ---- the raw pipe floor ----

// rawSession is the floor: length-prefixed frames, no JSON. With a reader
// goroutine the caller hands its answer over a channel, as any transport
// that serves several callers must; lockstep reads the answer itself.
type rawSession struct {
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Reader
	lockstep bool
	answers  chan []byte
	wbuf     []byte
	rbuf     []byte
}

func startRaw(lockstep bool) func(context.Context, string, []int) (session, error) {
	return func(ctx context.Context, bin string, _ []int) (session, error) {
		cmd, out, in, err := startProcess(bin)
		if err != nil {
			return nil, err
		}
		s := &rawSession{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20), lockstep: lockstep}
		if !lockstep {
			s.answers = make(chan []byte, 1)
			go func() {
				var buf [2][]byte // the caller reads one while the next is read
				for i := 0; ; i ^= 1 {
					b, err := workload.ReadFrame(s.out, buf[i])
					if err != nil {
						close(s.answers)
						return
					}
					buf[i] = b
					s.answers <- b
				}
			}()
		}
		// The handshake of the floor is one echo.
		if _, err := s.roundTrip([]byte("Ehello")); err != nil {
			_ = s.close()
			return nil, err
		}
		return s, nil
	}
}

func (s *rawSession) roundTrip(payload []byte) ([]byte, error) {
	var err error
	if s.wbuf, err = workload.WriteFrame(s.in, s.wbuf, payload); err != nil {
		return nil, fmt.Errorf("%w: %v", workload.ErrBroken, err)
	}
	if s.lockstep {
		s.rbuf, err = workload.ReadFrame(s.out, s.rbuf)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", workload.ErrBroken, err)
		}
		return s.rbuf, nil
	}
	answer, ok := <-s.answers
	if !ok {
		return nil, workload.ErrBroken
	}
	return answer, nil
}

// call carries an echo only; the floor has no other method.
func (s *rawSession) call(_ context.Context, method string, params, result any) error {
	if method != workload.MethodEcho {
		return fmt.Errorf("%w: the raw floor carries echoes only", workload.ErrUnknownMethod)
	}
	b, err := json.Marshal(params)
	if err != nil {
		return err
	}
	answer, err := s.roundTrip(append([]byte{'E'}, b...))
	if err != nil || result == nil {
		return err
	}
	return json.Unmarshal(answer[1:], result)
}

func (s *rawSession) upload(_ context.Context, total, chunk int, seed byte) (workload.CommitResult, error) {
	data, digest := workload.Data(total, seed)
	frame := make([]byte, chunk+1)
	frame[0] = 'C'
	start := time.Now()
	for off := 0; off < total; off += chunk {
		n := copy(frame[1:], data[off:min(off+chunk, total)])
		if _, err := s.roundTrip(frame[:1+n]); err != nil {
			return workload.CommitResult{}, err
		}
	}
	return workload.CommitResult{Bytes: int64(total), SHA256: digest, ChunksNanos: int64(time.Since(start))}, nil
}

func (s *rawSession) hostCallbacks() int64                     { return 0 }
func (s *rawSession) pid() int                                 { return s.cmd.Process.Pid }
func (s *rawSession) pushed(context.Context) ([]string, error) { return nil, nil }

func (s *rawSession) close() error {
	_ = s.in.Close()
	return reap(s.cmd)
}
