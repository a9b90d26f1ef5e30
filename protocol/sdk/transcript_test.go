package sdk_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

var update = flag.Bool("update", false, "rewrite the extension side of testdata/transcripts/*.txtar")

// echoManifest is the extension the transcripts talk to: one handler
// operation and nothing else, so every other surface is undeclared.
const echoManifest = `{"name":"echo","version":"1.0.0","command":["echo"],"protocol":[1],` +
	`"provides":{"operations":[{"name":"echo.say","kind":"handler"}]}}`

// echoInput steers echo.say in the transcripts.
type echoInput struct {
	Text string `json:"text,omitempty"`
	Wait string `json:"wait,omitempty"` // "cancel": until cancelled; "host": until the host answers a read
	Fail string `json:"fail,omitempty"` // "conflict", "retry_after" or "plain"
}

// echoExtension is the transcripts' extension. Its answers depend on its
// input alone, so a transcript replays the same every time.
func echoExtension() *sdk.Extension {
	return &sdk.Extension{
		Manifest: []byte(echoManifest),
		Operations: map[string]sdk.Operation{"echo.say": {Handler: func(ctx context.Context, host *sdk.Host, call protocol.OperationCallParams) (protocol.OperationCallResult, error) {
			var in echoInput
			if err := json.Unmarshal(call.Input, &in); err != nil {
				return protocol.OperationCallResult{}, protocol.Errorf(protocol.CodeInvalid, "input: %v", err)
			}
			switch in.Fail {
			case "conflict":
				return protocol.OperationCallResult{}, protocol.Errorf(protocol.CodeConflict, "greeting changed since it was read")
			case "retry_after":
				return protocol.OperationCallResult{}, protocol.RetryAfter("rate limited by the upstream service", time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC))
			case "plain":
				return protocol.OperationCallResult{}, errors.New("open /var/lib/echo/secret-path: disk full")
			}
			switch in.Wait {
			case "cancel":
				<-ctx.Done()
				return protocol.OperationCallResult{}, ctx.Err()
			case "host":
				if _, err := host.Get(ctx, "echo", "greeting"); err != nil {
					return protocol.OperationCallResult{}, err
				}
				return protocol.OperationCallResult{Output: json.RawMessage(`{"waited":true}`)}, nil
			}
			var said string
			_, err := host.Update(ctx, func(t *sdk.Txn) error {
				var greeting string
				if _, err := t.GetJSON("echo", "greeting", &greeting); err != nil {
					return err
				}
				said = strings.TrimSpace(greeting + " " + in.Text)
				return t.Put("echo", "last", said)
			})
			if err != nil {
				return protocol.OperationCallResult{}, err
			}
			out, _ := json.Marshal(map[string]string{"said": said})
			return protocol.OperationCallResult{Output: out}, nil
		}}},
		Shutdown: func(ctx context.Context, host *sdk.Host) error {
			_, err := host.Commit(ctx, protocol.KVCommitParams{Puts: []protocol.KVPut{{Namespace: "echo", Key: "state", Value: json.RawMessage(`"stopped"`)}}})
			return err
		},
		Logf: func(string, ...any) {},
	}
}

// transcriptInflight is the bound on requests in flight a transcript runs
// with, when not the protocol's.
var transcriptInflight = map[string]int{"overload.txtar": 1}

// TestTranscripts replays the host side of every transcript against the
// SDK over an in-memory pipe and compares what the extension sends with
// the extension side. -update rewrites the extension side.
//
// Pacing, so a replay is deterministic: a host request or notification is
// sent once no more host requests are unanswered than the extension has
// calls of its own outstanding (each unanswered request is waiting on the
// host); a response is sent once the extension has sent the request it
// answers, under the same condition; $/cancel is sent at once. At the end
// the replay waits for every host request to be answered, closes the
// extension's input and reads its output to the end.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/transcripts/*.txtar")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			require.NoError(t, err)
			host, ext := section(ar, "host"), section(ar, "extension")
			require.NotNil(t, host, "no -- host -- section")
			require.NotEmpty(t, bytes.TrimSpace(ar.Comment), "no header saying what the transcript pins")
			if n, ok := transcriptInflight[filepath.Base(file)]; ok {
				defer sdk.SetMaxInflight(n)()
			}
			got := replay(t, lines(host.Data), echoExtension())
			if *update {
				if ext == nil {
					ar.Files = append(ar.Files, txtar.File{Name: "extension"})
					ext = &ar.Files[len(ar.Files)-1]
				}
				ext.Data = []byte(strings.Join(got, "\n") + "\n")
				require.NoError(t, os.WriteFile(file, txtar.Format(ar), 0o644))
				return
			}
			require.NotNil(t, ext, "no -- extension -- section; run with -update")
			assert.Equal(t, strings.Join(lines(ext.Data), "\n"), strings.Join(got, "\n"))
		})
	}
}

// TestTranscriptsCatchADifference is the negative control: an extension
// that answers one call differently does not reproduce the lifecycle
// transcript.
func TestTranscriptsCatchADifference(t *testing.T) {
	ar, err := txtar.ParseFile("testdata/transcripts/lifecycle.txtar")
	require.NoError(t, err)
	ext := echoExtension()
	say := ext.Operations["echo.say"].Handler
	ext.Operations["echo.say"] = sdk.Operation{Handler: func(ctx context.Context, host *sdk.Host, call protocol.OperationCallParams) (protocol.OperationCallResult, error) {
		r, err := say(ctx, host, call)
		r.Output = json.RawMessage(`{"said":"something else"}`)
		return r, err
	}}
	got := replay(t, lines(section(ar, "host").Data), ext)
	assert.NotEqual(t, lines(section(ar, "extension").Data), got)
}

func section(ar *txtar.Archive, name string) *txtar.File {
	for i := range ar.Files {
		if ar.Files[i].Name == name {
			return &ar.Files[i]
		}
	}
	return nil
}

func lines(data []byte) []string {
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// wireMessage is just enough of a message to pace a replay.
type wireMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

func parseWire(t *testing.T, line string) wireMessage {
	var m wireMessage
	require.NoError(t, json.Unmarshal([]byte(line), &m), "not JSON: %s", line)
	return m
}

func replay(t *testing.T, host []string, ext *sdk.Extension) []string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	toExtR, toExtW := io.Pipe()
	fromExtR, fromExtW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- sdk.ServeConn(ctx, toExtR, fromExtW, ext) }()
	incoming := make(chan string)
	go func() {
		defer close(incoming)
		sc := bufio.NewScanner(fromExtR)
		sc.Buffer(nil, protocol.MaxMessageBytes+1)
		for sc.Scan() {
			incoming <- sc.Text()
		}
	}()

	var got []string
	open := map[string]bool{}    // host requests not yet answered
	extOpen := map[string]bool{} // extension requests not yet answered
	eof := false
	receive := func() {
		select {
		case line, ok := <-incoming:
			if !ok {
				eof = true
				return
			}
			got = append(got, line)
			m := parseWire(t, line)
			switch {
			case m.Method == "" && m.ID != nil:
				delete(open, string(m.ID))
			case m.Method != "" && m.ID != nil:
				extOpen[string(m.ID)] = true
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("replay stalled; the extension sent so far:\n%s", strings.Join(got, "\n"))
		}
	}
	settle := func(extra func() bool) {
		for !eof && !(len(open) <= len(extOpen) && extra()) {
			receive()
		}
	}
	for _, line := range host {
		m := parseWire(t, line)
		switch {
		case m.Method == "$/cancel":
		case m.Method == "":
			id := string(m.ID)
			settle(func() bool { return extOpen[id] })
			delete(extOpen, id)
		default:
			settle(func() bool { return true })
			if m.ID != nil {
				open[string(m.ID)] = true
			}
		}
		if eof {
			t.Fatalf("the extension closed its output before the host sent %s", line)
		}
		_, err := io.WriteString(toExtW, line+"\n")
		require.NoError(t, err)
	}
	for !eof && len(open) > 0 {
		receive()
	}
	toExtW.Close()
	for !eof {
		receive()
	}
	select {
	case err := <-served:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("ServeConn did not return after the end of its input")
	}
	return got
}
