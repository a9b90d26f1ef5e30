// Command child is the extension the invoke tests run: a raw JSON-RPC
// speaker (no SDK, so it can break the protocol on purpose) whose
// behaviour INVOKE_CHILD_MODE chooses. It reads its manifest from the
// directory of its executable.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// broken are the modes that answer the call with one line that breaks
// the protocol.
var broken = map[string]string{
	"garbage":        "this is not json",
	"dup-keys":       `{"jsonrpc":"2.0","id":3,"result":{},"result":{}}`,
	"bad-utf8":       "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"s\":\"\xff\"}}",
	"lone-surrogate": `{"jsonrpc":"2.0","id":3,"result":{"s":"\ud800"}}`,
	"huge-number":    `{"jsonrpc":"2.0","id":3,"result":{"n":1e999}}`,
	"unknown-member": `{"jsonrpc":"2.0","id":3,"result":{},"extra":1}`,
	"member-case":    `{"jsonrpc":"2.0","id":3,"Result":{}}`,
	"two-documents":  `{"jsonrpc":"2.0","id":3,"result":{}} {}`,
	"mismatched-id":  `{"jsonrpc":"2.0","id":103,"result":{}}`,
	"app-error":      `{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"secret-in-message","data":{"code":"invalid"}}}`,
}

var out = bufio.NewWriter(os.Stdout)

func write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	out.Write(append(b, '\n'))
	out.Flush()
}

func answer(id json.RawMessage, result any) {
	b, err := json.Marshal(result)
	if err != nil {
		panic(err)
	}
	write(message{JSONRPC: "2.0", ID: id, Result: b})
}

func main() {
	mode := os.Getenv("INVOKE_CHILD_MODE")
	switch mode {
	case "linger":
		// A descendant holding the pipes; it ends when it is killed, or
		// after a minute at the latest.
		time.Sleep(time.Minute)
		return
	}
	if f := os.Getenv("INVOKE_CHILD_STARTED"); f != "" {
		os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o600)
	}
	exe, _ := os.Executable()
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(exe), "open-conduit-extension.json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(9)
	}
	var manifest bytes.Buffer
	json.Compact(&manifest, raw)
	if mode == "bad-manifest" {
		manifest.Reset()
		manifest.WriteString(`{"name":"other","version":"1","command":["child"],"protocol":[1],"provides":{}}`)
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			if mode == "ignore-eof" {
				time.Sleep(time.Hour)
			}
			return
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			os.Exit(8)
		}
		switch m.Method {
		case "initialize":
			answer(m.ID, map[string]any{"protocol_version": 1, "manifest": json.RawMessage(manifest.Bytes())})
		case "configure":
			answer(m.ID, map[string]any{})
			if mode == "stop-reading" {
				time.Sleep(time.Hour) // never reads the call
			}
		case "shutdown":
			answer(m.ID, map[string]any{})
			if mode == "fail-after-shutdown" {
				os.Exit(1)
			}
		default:
			call(mode, m, in)
		}
	}
}

// call answers the call as mode says.
func call(mode string, m message, in *bufio.Reader) {
	if line, ok := broken[mode]; ok {
		out.WriteString(line + "\n")
		out.Flush()
		return
	}
	switch mode {
	case "flood-stdout":
		chunk := bytes.Repeat([]byte("x"), 4096)
		for {
			os.Stdout.Write(chunk)
		}
	case "flood-stderr":
		chunk := bytes.Repeat([]byte("e"), 4096)
		for {
			os.Stderr.Write(chunk)
		}
	case "hang":
		time.Sleep(time.Hour)
	case "exit":
		os.Exit(3)
	case "descendant", "detach":
		cmd := exec.Command(os.Args[0])
		cmd.Env = []string{"INVOKE_CHILD_MODE=linger"}
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if mode == "detach" {
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		if err := cmd.Start(); err != nil {
			os.Exit(7)
		}
		if f := os.Getenv("INVOKE_CHILD_PIDFILE"); f != "" {
			os.WriteFile(f, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
		}
	case "calls-host":
		// Ask the host for a service and report what it answered.
		write(message{JSONRPC: "2.0", Method: "log", Params: json.RawMessage(`{"message":"hello"}`)})
		write(message{JSONRPC: "2.0", ID: json.RawMessage(`"q1"`), Method: "kv.get", Params: json.RawMessage(`{"namespace":"x","key":"k"}`)})
		line, err := in.ReadBytes('\n')
		if err != nil {
			os.Exit(6)
		}
		answer(m.ID, map[string]any{"host_answer": json.RawMessage(bytes.TrimSpace(line))})
		return
	case "stderr-chatter":
		fmt.Fprintln(os.Stderr, "some diagnostics of the extension's own")
	}
	// What each descriptor above the standard three is open on.
	fds := []string{}
	if entries, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range entries {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
				target, _ := os.Readlink("/proc/self/fd/" + e.Name())
				fds = append(fds, target)
			}
		}
	}
	cwd, _ := os.Getwd()
	pgid, _ := syscall.Getpgid(0)
	sid, _, _ := syscall.Syscall(syscall.SYS_GETSID, 0, 0, 0)
	answer(m.ID, map[string]any{
		"params": m.Params, "env": os.Environ(), "cwd": cwd, "args": strings.Join(os.Args[1:], " "),
		"pid": os.Getpid(), "pgid": pgid, "sid": int(sid), "fds": fds,
	})
}
