package notes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// childEnv names what the re-executed test binary serves.
const childEnv = "NOTES_TEST_CHILD"

// children are the programs the test binary runs as when re-executed with
// childEnv set: each serves on stdio as a real extension process does.
var children = map[string]func() *sdk.Extension{
	"release-1": func() *sdk.Extension { return notes.Release(1) },
	"release-2": func() *sdk.Extension { return notes.Release(2) },
	"release-3": func() *sdk.Extension { return notes.Release(3) },
	// stray prints to stdout from inside a handler, as careless code
	// would: the SDK must keep the protocol stream intact.
	"stray": func() *sdk.Extension {
		ext := notes.Extension()
		add := ext.Operations[notes.OpAdd]
		inner := add.Handler
		add.Handler = func(ctx context.Context, host *sdk.Host, p protocol.OperationCallParams) (protocol.OperationCallResult, error) {
			fmt.Println("stray line from a handler")
			fmt.Fprint(os.Stdout, `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n")
			return inner(ctx, host, p)
		}
		ext.Operations[notes.OpAdd] = add
		return ext
	},
}

func TestMain(m *testing.M) {
	// Run by the host as "open-conduit extension-run notes" would be.
	if len(os.Args) == 3 && os.Args[1] == "extension-run" && os.Args[2] == notes.Name {
		release := 3
		if r, err := strconv.Atoi(os.Getenv(releaseEnv)); err == nil {
			release = r
		}
		if err := sdk.Serve(notes.Release(release)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if name := os.Getenv(childEnv); name != "" {
		mk, ok := children[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown child %q\n", name)
			os.Exit(2)
		}
		if err := sdk.Serve(mk()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// testContext bounds a test so a bug fails it rather than hanging it.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// notesBinary builds cmd/notes once per test run, exactly as a third
// party builds its extension.
func notesBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "notes-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "notes")
		out, err := exec.Command("go", "build", "-o", binPath, "./cmd/notes").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// startProcess starts cmd with the protocol on its stdio, served on this
// side by host; at the end of the test it closes the connection (end of
// input) and requires the extension to exit.
func startProcess(t *testing.T, cmd *exec.Cmd, host *sdktest.Host) *sdktest.Process {
	t.Helper()
	p, err := sdktest.Start(cmd, host)
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Conn.Close() // end of input: the extension exits
		select {
		case <-p.Done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-p.Done
			t.Errorf("the extension did not exit at end of input")
		}
	})
	return p
}

// childCommand re-executes the test binary as the named child.
func childCommand(t *testing.T, name string) *exec.Cmd {
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+name)
	return cmd
}

// mode is how a test reaches a release of the extension.
type mode struct {
	name  string
	start func(t *testing.T, release int, host *sdktest.Host) sdk.Caller
}

var modes = []mode{
	{"inprocess", func(t *testing.T, release int, host *sdktest.Host) sdk.Caller {
		c, err := sdk.Attach(notes.Release(release), host)
		require.NoError(t, err)
		return c
	}},
	{"pipe", func(t *testing.T, release int, host *sdktest.Host) sdk.Caller {
		conn, done, err := sdktest.Pipe(context.Background(), notes.Release(release), host)
		require.NoError(t, err)
		t.Cleanup(func() {
			conn.Close()
			<-done
		})
		return conn
	}},
	{"process", func(t *testing.T, release int, host *sdktest.Host) sdk.Caller {
		// Release 3 is the real binary; older releases are the test
		// binary serving them, since no binary of theirs ships.
		cmd := childCommand(t, "release-"+strconv.Itoa(release))
		if release == 3 {
			cmd = exec.Command(notesBinary(t))
		}
		return startProcess(t, cmd, host).Conn
	}},
}

// started is a release initialized and configured with one notes entry
// in scope "team" whose store is dir.
type started struct {
	c        sdk.Caller
	host     *sdktest.Host
	stateDir string
	store    notes.Store
	source   string
}

func startRelease(t *testing.T, m mode, release int) *started {
	t.Helper()
	s := &started{host: sdktest.New(), stateDir: t.TempDir()}
	s.store = notes.Store{Dir: filepath.Join(s.stateDir, "inbox")}
	s.source = notes.SourceName("team", "inbox")
	s.c = m.start(t, release, s.host)
	ctx := testContext(t)
	require.NoError(t, s.c.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1},
		Host: protocol.HostInfo{Name: "open-conduit", Version: "test"}, StateDir: s.stateDir}, nil))
	kv := 0
	if release == 3 {
		kv = 2
	}
	var res protocol.ConfigureResult
	require.NoError(t, s.c.Call(ctx, "configure", configure(kv, kv), &res))
	require.Equal(t, []protocol.SourceDecl{{Name: s.source, ScopeID: "team", Families: []string{notes.FamilyNote}, Reconcile: true}}, res.Sources)
	return s
}

// configure is the configuration of one notes entry, "inbox" in scope
// "team", whose store is the state directory's inbox.
func configure(stored, declared int) protocol.ConfigureParams {
	return protocol.ConfigureParams{
		Entries: []protocol.ConfigEntry{{ScopeID: "team", ID: "inbox", Type: notes.Name,
			Config: json.RawMessage(`{"dir":"inbox","digest":"09:30"}`)}},
		KV: protocol.KVLayout{Stored: stored, Declared: declared},
	}
}

// event is an accepted Event of the notes.note family with payload.
func event(schema string, payload string) protocol.Event {
	return protocol.Event{ID: "ev-1", Sequence: 1, ScopeID: "team", Source: "notes/team/inbox", DeliveryID: "d-1",
		Family: notes.FamilyNote, Schema: schema, Payload: json.RawMessage(payload), Root: "ev-1"}
}
