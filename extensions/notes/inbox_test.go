package notes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// fakeDeliver is the host's ingress.deliver for a receiver under test: it
// records each call, and answers each Event added once and a no-op after,
// as durable acceptance does; refuse, when set, refuses instead.
type fakeDeliver struct {
	mu       sync.Mutex
	calls    []protocol.IngressDeliverParams
	accepted map[string]bool
	refuse   error
	// during runs inside each call, before the answer.
	during func(p protocol.IngressDeliverParams)
}

func (f *fakeDeliver) deliver(ctx context.Context, p protocol.IngressDeliverParams) (protocol.IngressDeliverResult, error) {
	if f.during != nil {
		f.during(p)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, p)
	if f.refuse != nil {
		return protocol.IngressDeliverResult{}, f.refuse
	}
	if f.accepted == nil {
		f.accepted = map[string]bool{}
	}
	var res protocol.IngressDeliverResult
	for _, e := range p.Events {
		key := p.Source + " " + e.DeliveryID
		res.Accepted = append(res.Accepted, protocol.EmissionOutcome{Event: &protocol.Event{ID: key}, Added: !f.accepted[key]})
		f.accepted[key] = true
	}
	return res, nil
}

func (f *fakeDeliver) deliveries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		for _, e := range c.Events {
			out = append(out, e.DeliveryID)
		}
	}
	return out
}

// logLines collects a receiver's log.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) matching(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func writeDelivery(t *testing.T, dir, name string, noteIDs ...string) {
	t.Helper()
	var d notes.Delivery
	for _, id := range noteIDs {
		d.Notes = append(d.Notes, notes.Record{ID: id, Rev: "1", Title: "note " + id})
	}
	b, err := json.Marshal(d)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
}

const inboxSource = "notes/team/inbox/inbox"

// TestInboxAcknowledgesOnlyAfterTheAnswer: a pass delivers the files in
// name order, each while its file is still there (the acknowledgement
// waits for the host's answer), and removes each once it is accepted.
func TestInboxAcknowledgesOnlyAfterTheAnswer(t *testing.T) {
	dir := t.TempDir()
	writeDelivery(t, dir, "b2.json", "n3")
	writeDelivery(t, dir, "a1.json", "n1", "n2")
	var present []bool
	f := &fakeDeliver{}
	f.during = func(p protocol.IngressDeliverParams) {
		// The file of the delivery in flight is still unacknowledged.
		name := map[string]string{"n1@1.s3": "a1.json", "n3@1.s3": "b2.json"}[p.Events[0].DeliveryID]
		_, err := os.Stat(filepath.Join(dir, name))
		present = append(present, err == nil)
	}
	var log logLines
	in := notes.NewTestInbox(dir, inboxSource, f.deliver, log.logf)
	acked, kept, refused := in.Pass(t.Context())
	assert.Equal(t, []string{"a1.json", "b2.json"}, acked)
	assert.Empty(t, kept)
	assert.Empty(t, refused)
	assert.Equal(t, []bool{true, true}, present, "each file is there while the host answers")
	assert.Equal(t, []string{"n1@1.s3", "n2@1.s3", "n3@1.s3"}, f.deliveries(), "in name order, one file a call")
	for _, c := range f.calls {
		assert.Equal(t, inboxSource, c.Source)
		for _, e := range c.Events {
			assert.Equal(t, inboxSource, e.Source)
			assert.Equal(t, notes.FamilyNote, e.Family)
			assert.Equal(t, "notes.note.v3", e.Schema)
		}
	}
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, left, "acknowledged files are removed")
	assert.Equal(t, 1, log.matching("delivery a1 acknowledged (2 Events, 2 new)"))
}

// TestInboxKeepsWhatTheHostDidNotAccept: a refused or failed delivery
// stays, and the next pass delivers it again under the same identities,
// which the host answers as a no-op when it had accepted them.
func TestInboxKeepsWhatTheHostDidNotAccept(t *testing.T) {
	dir := t.TempDir()
	writeDelivery(t, dir, "d1.json", "n1")
	f := &fakeDeliver{refuse: protocol.Errorf(protocol.CodeUnauthorized, "source %q is not registered", inboxSource)}
	var log logLines
	in := notes.NewTestInbox(dir, inboxSource, f.deliver, log.logf)
	acked, kept, _ := in.Pass(t.Context())
	assert.Empty(t, acked)
	assert.Equal(t, []string{"d1.json"}, kept)
	assert.FileExists(t, filepath.Join(dir, "d1.json"), "a refused delivery is not acknowledged")
	assert.Equal(t, 1, log.matching("delivery d1 kept for the next pass"))

	// The host accepted it, but the answer was lost: the file stays.
	f.refuse = nil
	_, err := f.deliver(t.Context(), f.calls[0])
	require.NoError(t, err)
	f.refuse = context.DeadlineExceeded
	_, kept, _ = in.Pass(t.Context())
	assert.Equal(t, []string{"d1.json"}, kept)
	assert.FileExists(t, filepath.Join(dir, "d1.json"))

	f.refuse = nil
	acked, kept, _ = in.Pass(t.Context())
	assert.Equal(t, []string{"d1.json"}, acked)
	assert.Empty(t, kept)
	assert.NoFileExists(t, filepath.Join(dir, "d1.json"))
	assert.Equal(t, []string{"n1@1.s3", "n1@1.s3", "n1@1.s3", "n1@1.s3"}, f.deliveries(), "the same identity every time")
	assert.Equal(t, 1, log.matching("delivery d1 acknowledged (1 Events, 0 new)"), "the redelivery was a no-op")
}

// TestInboxRefusesWhatIsNoDelivery: names that are no delivery ID, other
// extensions, links, directories, FIFOs, oversized and malformed files
// are refused, logged once each, never delivered and never removed; dot
// files (being written) are left alone without a word.
func TestInboxRefusesWhatIsNoDelivery(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	writeDelivery(t, outside, "real.json", "secret")
	require.NoError(t, os.Symlink(filepath.Join(outside, "real.json"), filepath.Join(dir, "link.json")))
	writeDelivery(t, dir, "bad name.json", "n1")
	writeDelivery(t, dir, "-dash.json", "n1")
	writeDelivery(t, dir, "note.txt", "n1")
	writeDelivery(t, dir, strings.Repeat("x", 129)+".json", "n1")
	writeDelivery(t, dir, ".partial.json", "n1")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub.json"), 0o700))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken.json"), []byte(`{"notes":[`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "badnote.json"), []byte(`{"notes":[{"id":"../x","rev":"1"}]}`), 0o600))
	big := `{"notes":[{"id":"n1","rev":"1","title":"` + strings.Repeat("x", notes.MaxInboxFileBytes) + `"}]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.json"), []byte(big), 0o600))

	f := &fakeDeliver{}
	var log logLines
	in := notes.NewTestInbox(dir, inboxSource, f.deliver, log.logf)
	_, _, refused := in.Pass(t.Context())
	want := []string{"-dash.json", "bad name.json", "badnote.json", "big.json", "broken.json", "fifo.json", "link.json",
		"note.txt", "sub.json", strings.Repeat("x", 129) + ".json"}
	assert.ElementsMatch(t, want, refused)
	assert.Empty(t, f.calls, "nothing refused is delivered")
	assert.Equal(t, 1, log.matching("link.json refused: a symbolic link"))
	assert.Equal(t, 1, log.matching("big.json refused:"))
	assert.Zero(t, log.matching(".partial.json"), "a file being written is no refusal")

	// A second pass refuses the same, and logs nothing again.
	_, _, again := in.Pass(t.Context())
	assert.ElementsMatch(t, want, again)
	assert.Equal(t, 1, log.matching("link.json refused"))
	for _, name := range append(want, ".partial.json") {
		_, err := os.Lstat(filepath.Join(dir, name))
		assert.NoError(t, err, "%s is left where it is", name)
	}
	assert.FileExists(t, filepath.Join(outside, "real.json"), "the link's target is untouched")
}

// TestInboxConfigured: an entry naming inbox_dir registers the inbox
// source and its receiver delivers through the host's ingress.deliver; a
// configure without it unregisters the source and stops the receiver; a
// bad inbox_poll is refused by validate and configure alike.
func TestInboxConfigured(t *testing.T) {
	ctx := testContext(t)
	state := t.TempDir()
	inboxDir := filepath.Join(state, "spool")
	require.NoError(t, os.Mkdir(inboxDir, 0o700))
	got := make(chan protocol.IngressDeliverParams, 16)
	h := sdktest.New()
	h.Override = func(ctx context.Context, method string, params any) (any, bool, error) {
		if method != "ingress.deliver" {
			return nil, false, nil
		}
		p := params.(protocol.IngressDeliverParams)
		got <- p
		var res protocol.IngressDeliverResult
		for range p.Events {
			res.Accepted = append(res.Accepted, protocol.EmissionOutcome{Event: &protocol.Event{ID: "ev"}, Added: true})
		}
		return res, true, nil
	}
	ext := notes.Extension()
	c, err := sdk.Attach(ext, h)
	require.NoError(t, err)
	require.NoError(t, c.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}, StateDir: state}, nil))
	withInbox := protocol.ConfigureParams{KV: protocol.KVLayout{Stored: 2, Declared: 2}, Entries: []protocol.ConfigEntry{{
		ScopeID: "team", ID: "inbox", Type: notes.Name, Config: json.RawMessage(`{"inbox_dir":"spool","inbox_poll":"100ms"}`)}}}
	var res protocol.ConfigureResult
	require.NoError(t, c.Call(ctx, "configure", withInbox, &res))
	assert.Equal(t, []protocol.SourceDecl{
		{Name: notes.SourceName("team", "inbox"), ScopeID: "team", Families: []string{notes.FamilyNote}, Reconcile: true},
		{Name: notes.InboxSourceName("team", "inbox"), ScopeID: "team", Families: []string{notes.FamilyNote}},
	}, res.Sources)

	writeDelivery(t, inboxDir, "a1.json", "n1")
	writeDelivery(t, inboxDir, "a2.json", "n2")
	for _, want := range []string{"n1@1.s3", "n2@1.s3"} {
		select {
		case p := <-got:
			assert.Equal(t, notes.InboxSourceName("team", "inbox"), p.Source)
			require.Len(t, p.Events, 1)
			assert.Equal(t, want, p.Events[0].DeliveryID)
		case <-ctx.Done():
			t.Fatalf("no delivery of %s", want)
		}
	}
	// a2 was delivered after a1's answer, in the same pass: a1 is gone.
	assert.NoFileExists(t, filepath.Join(inboxDir, "a1.json"))

	without := withInbox
	without.Entries = []protocol.ConfigEntry{{ScopeID: "team", ID: "inbox", Type: notes.Name, Config: json.RawMessage(`{}`)}}
	require.NoError(t, c.Call(ctx, "configure", without, &res))
	assert.Len(t, res.Sources, 1, "the inbox source is no longer registered")

	for _, cfg := range []string{`{"inbox_dir":"spool","inbox_poll":"1ms"}`, `{"inbox_dir":"spool","inbox_poll":"soon"}`, `{"inbox_poll":"5s"}`} {
		err := c.Call(ctx, "validate", protocol.ValidateParams{Kind: protocol.ValidateExtension, Type: notes.Name, Config: json.RawMessage(cfg)}, nil)
		assert.ErrorIs(t, err, protocol.ErrInvalid, "validate %s", cfg)
		bad := withInbox
		bad.Entries = []protocol.ConfigEntry{{ScopeID: "team", ID: "inbox", Type: notes.Name, Config: json.RawMessage(cfg)}}
		assert.ErrorIs(t, c.Call(ctx, "configure", bad, nil), protocol.ErrInvalid, "configure %s", cfg)
	}
	require.NoError(t, c.Call(ctx, "shutdown", nil, nil))
}

// FuzzInboxFile puts one file, named and filled from outside, in an inbox
// and runs a pass: a file is delivered only when its name is a delivery
// ID with .json and its body a delivery whose Events the host can accept
// on the inbox's source, and removed only then; anything else is refused
// and left where it is, and nothing else in the directory is touched.
func FuzzInboxFile(f *testing.F) {
	f.Add("a1.json", []byte(`{"notes":[{"id":"a","rev":"1","title":"t"}]}`))
	f.Add("../a1.json", []byte(`{"notes":[{"id":"a","rev":"1","title":"t"}]}`))
	f.Add("bad name.json", []byte(`{"notes":[]}`))
	f.Add(".partial.json", []byte(`{"notes":[{"id":"a","rev":"1"}]}`))
	f.Add("x.json", []byte(`not json`))
	m, err := protocol.ParseManifest(notes.Extension().Manifest)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 200 || name == ".keep" {
			t.Skip("not a file name in one directory")
		}
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, ".keep"), []byte("not mine"), 0o600))
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
			t.Skip("the file system refuses the name")
		}
		f := &fakeDeliver{}
		acked, kept, refused := notes.NewTestInbox(dir, inboxSource, f.deliver, func(string, ...any) {}).Pass(t.Context())
		assert.Empty(t, kept)
		for _, c := range f.calls {
			assert.Equal(t, inboxSource, c.Source)
			for _, e := range c.Events {
				if e.Source != inboxSource || e.Family != notes.FamilyNote || m.CheckWrite(e.Schema) != nil || !json.Valid(e.Payload) ||
					!strings.Contains(e.DeliveryID, "@") || strings.ContainsAny(e.DeliveryID, `/\`) {
					t.Fatalf("file %q %q gave an event the host would refuse: %+v", name, body, e)
				}
			}
		}
		_, err := os.Stat(filepath.Join(dir, name))
		switch {
		case len(acked) == 1:
			assert.Equal(t, []string{name}, acked)
			assert.Len(t, f.calls, 1)
			assert.True(t, strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, "."), "delivered %q", name)
			assert.Error(t, err, "an acknowledged file is removed")
		default:
			assert.Empty(t, f.calls, "%q was not delivered, so nothing was sent", name)
			assert.NoError(t, err, "%q is left where it is", name)
			if !strings.HasPrefix(name, ".") {
				assert.Equal(t, []string{name}, refused)
			}
		}
		got, err := os.ReadFile(filepath.Join(dir, ".keep"))
		require.NoError(t, err)
		assert.Equal(t, "not mine", string(got))
	})
}
