package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// The test binary re-runs itself as an extension: a package's command is
// ["ext", "child:<mode>"], ext being a link to the test binary, and
// TestMain serves the mode instead of running the tests. Each mode is a
// deliberately well- or badly-behaved extension speaking JSON-RPC
// directly, so the faults are exactly what a test asks for.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "child:") {
		runChild(strings.TrimPrefix(os.Args[1], "child:"))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childModes: "sdk", "sdk-runner" and "sdk-refusing" serve adaptExtension,
// runnerExtension and refusingExtension with sdk.Serve; "good" serves the test methods; the others change one thing.
//
//	bad-version     initialize answers protocol version 99
//	no-version      initialize is refused with unsupported_protocol_version
//	bad-manifest    initialize returns a manifest that differs from the file
//	bad-register    configure registers a source outside its namespace
//	foreign-scope   configure registers a source of its own in a scope it is not configured in
//	ignore-sigterm  ignores SIGTERM and the end of stdin
//	detach          starts a grandchild in its own session holding stderr
//	stderr-flood    writes 2 MiB to stderr before it serves
//	fail-start      exits before it answers initialize
//	early-calls     calls the host before it answers initialize (see callBeforeAnswering)
func runChild(mode string) {
	if mode == "sdk" || mode == "sdk-runner" || mode == "sdk-refusing" {
		raw, err := os.ReadFile(protocol.ManifestFile)
		if err == nil && mode == "sdk" {
			err = sdk.Serve(adaptExtension(raw))
		} else if err == nil && mode == "sdk-refusing" {
			err = sdk.Serve(refusingExtension(raw))
		} else if err == nil {
			err = sdk.Serve(runnerExtension(raw))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if mode == "stderr-flood" {
		chunk := strings.Repeat("x", 1023) + "\n"
		for range 2048 {
			os.Stderr.WriteString(chunk)
		}
	}
	if mode == "fail-start" {
		fmt.Fprintln(os.Stderr, "failing at start")
		os.Exit(2)
	}
	if mode == "ignore-sigterm" {
		signal.Ignore(syscall.SIGTERM)
	}
	if mode == "detach" {
		cmd := exec.Command("sleep", "60")
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err == nil {
			os.WriteFile("detached.pid", []byte(fmt.Sprint(cmd.Process.Pid)), 0o600)
		}
	}
	fmt.Fprintf(os.Stderr, "child %s started\n", mode)
	// The handlers reach the connection through peer: NewConn starts
	// reading at once, so a request can be served before the assignment
	// to conn below has run (under load it was: a nil conn in test.call).
	var conn *jsonrpc.Conn
	connected := make(chan struct{})
	peer := func() *jsonrpc.Conn { <-connected; return conn }
	methods := jsonrpc.Methods{
		"initialize": func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			var p protocol.InitializeParams
			if err := req.DecodeParams(&p); err != nil {
				return nil, err
			}
			raw, err := os.ReadFile(protocol.ManifestFile)
			if err != nil {
				return nil, err
			}
			if mode == "early-calls" {
				if err := callBeforeAnswering(ctx, peer(), raw); err != nil {
					return nil, err
				}
			}
			if n, ok := strings.CutPrefix(mode, "rendezvous-"); ok {
				if err := rendezvous(n); err != nil {
					return nil, err
				}
			}
			v, err := protocol.Negotiate([]protocol.Version{protocol.Version1}, p.ProtocolVersions)
			switch mode {
			case "bad-version":
				v, err = 99, nil
			case "no-version":
				err = protocol.ErrUnsupportedProtocolVersion
			case "bad-manifest":
				var m map[string]any
				json.Unmarshal(raw, &m)
				m["version"] = "9.9.9-other"
				raw, _ = json.Marshal(m)
			}
			if err != nil {
				return nil, err
			}
			return protocol.InitializeResult{ProtocolVersion: v, Manifest: raw}, nil
		},
		"configure": func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			var p protocol.ConfigureParams
			if err := req.DecodeParams(&p); err != nil {
				return nil, err
			}
			var res protocol.ConfigureResult
			for _, e := range p.Entries {
				var c struct {
					Source   string   `json:"source"`
					Families []string `json:"families"`
				}
				json.Unmarshal(e.Config, &c)
				if c.Source != "" {
					res.Sources = append(res.Sources, protocol.SourceDecl{Name: c.Source, ScopeID: e.ScopeID, Families: c.Families})
				}
			}
			if mode == "bad-register" {
				res.Sources = append(res.Sources, protocol.SourceDecl{Name: "someone-else/x"})
			}
			if mode == "foreign-scope" && len(res.Sources) > 0 {
				// Its own source and families, in a scope it was not given.
				res.Sources = append(res.Sources, protocol.SourceDecl{Name: res.Sources[0].Name + "-x", ScopeID: "not-mine",
					Families: res.Sources[0].Families})
			}
			os.WriteFile("configured.json", req.Params, 0o600)
			return res, nil
		},
		"shutdown": func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			return protocol.Empty{}, nil
		},
		"test.echo": func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			return req.Params, nil
		},
		"test.env": func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			wd, _ := os.Getwd()
			return map[string]any{"env": os.Environ(), "dir": wd}, nil
		},
		"test.crash": func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			os.Exit(3)
			return nil, nil
		},
		"test.partial": func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			os.Stdout.WriteString(`{"jsonrpc":"2.0","id":1,"res`)
			os.Exit(4)
			return nil, nil
		},
		"test.stray": func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			os.Stdout.WriteString("debug: this is not JSON\n")
			select {}
		},
		// test.reenter calls back to the host while the host's call is
		// outstanding and answers the code it got.
		"test.reenter": func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			err := peer().Call(ctx, "kv.get", protocol.KVGetParams{Namespace: "x", Key: "k"}, nil)
			return map[string]string{"code": string(protocol.CodeOf(err))}, nil
		},
		"test.hang": func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			select {}
		},
		// test.call makes a call to the host and answers its result or
		// error, so a test drives the host service over the wire.
		"test.call": func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			var p struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if err := req.DecodeParams(&p); err != nil {
				return nil, err
			}
			var raw json.RawMessage
			if err := peer().Call(ctx, p.Method, p.Params, &raw); err != nil {
				return nil, err
			}
			return raw, nil
		},
	}
	conn = jsonrpc.NewConn(os.Stdin, os.Stdout, methods, &jsonrpc.Options{
		DecodeError: func(code int, message string, data json.RawMessage) error {
			return protocol.DecodeWireError(code, message, data)
		},
	})
	close(connected)
	<-conn.Done()
	if mode == "ignore-sigterm" {
		select {}
	}
}

// earlyCalls are the calls callBeforeAnswering makes, each of which would
// succeed after the handshake: a commit to the extension's own namespace,
// reads of it, of the state and of the log.
func earlyCalls(name string) []struct {
	Method string
	Params any
} {
	return []struct {
		Method string
		Params any
	}{
		{"kv.commit", protocol.KVCommitParams{Puts: []protocol.KVPut{{Namespace: name, Key: "early", Value: json.RawMessage(`1`)}}}},
		{"kv.get", protocol.KVGetParams{Namespace: name, Key: "early"}},
		{"kv.list", protocol.KVListParams{Namespace: name}},
		{"state.scopes", protocol.Empty{}},
		{"state.sequence", protocol.Empty{}},
	}
}

// callBeforeAnswering makes earlyCalls while the host waits for the
// initialize answer, each awaited, and writes the code each got to
// early.json ("" for a call the host served). It also sends a kv.commit
// as a notification and one whose answer it does not wait for, neither of
// which may be applied.
func callBeforeAnswering(ctx context.Context, conn *jsonrpc.Conn, manifest []byte) error {
	var m struct{ Name string }
	if err := json.Unmarshal(manifest, &m); err != nil {
		return err
	}
	conn.Notify(ctx, "kv.commit", protocol.KVCommitParams{Puts: []protocol.KVPut{{Namespace: m.Name, Key: "notified", Value: json.RawMessage(`1`)}}})
	codes := map[string]string{}
	for _, c := range earlyCalls(m.Name) {
		if err := conn.Call(ctx, c.Method, c.Params, nil); err != nil {
			codes[c.Method] = string(protocol.CodeOf(err))
		} else {
			codes[c.Method] = ""
		}
	}
	raw, _ := json.Marshal(codes)
	if err := os.WriteFile("early.json", raw, 0o600); err != nil {
		return err
	}
	// One more commit, not awaited: written straight before the answer,
	// so it is on the stream first, however late the host serves it.
	line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "unawaited", "method": "kv.commit",
		"params": protocol.KVCommitParams{Puts: []protocol.KVPut{{Namespace: m.Name, Key: "unawaited", Value: json.RawMessage(`1`)}}}})
	_, err := os.Stdout.Write(append(line, '\n'))
	return err
}

// rendezvous announces this child beside its siblings (the packages share
// a parent directory) and waits, bounded, until n of them are in their
// handshake at once: it can only succeed when the host runs the
// handshakes concurrently.
func rendezvous(n string) error {
	want, err := strconv.Atoi(n)
	if err != nil {
		return err
	}
	wd, _ := os.Getwd()
	if err := os.WriteFile(filepath.Join("..", "arrived-"+filepath.Base(wd)), nil, 0o600); err != nil {
		return err
	}
	for range 1000 {
		got, _ := filepath.Glob(filepath.Join("..", "arrived-*"))
		if len(got) >= want {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("only some of %d handshakes ran at once", want)
}
