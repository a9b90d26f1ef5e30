package notes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// The inbox: a receiver of notes' own, the example of an extension that
// delivers from an upstream it watches itself (ingress.deliver) rather
// than being pushed to or scanned by the host. A notes entry whose config
// names inbox_dir registers a second source, InboxSourceName, and reads
// that spool directory every inbox_poll: each file <delivery-id>.json is
// one delivery, a Delivery body as the webhook takes. A pass delivers the
// files in name order, one at a time, and removes a file (the upstream's
// acknowledgement) only once the host has answered that its Events are
// durably accepted. A crash in between leaves the file, the next pass
// delivers it again, and the Events' identities (a note's revision, as
// the webhook's) make the redelivery a no-op the host answers as before.
//
// An upstream writes a delivery under a name that starts with a dot and
// renames it into place, so a pass never reads half a file; dot files are
// left alone. Anything else that is not a regular file named
// <delivery-id>.json of at most MaxInboxFileBytes holding a Delivery is
// refused: logged (once per name and reason) and left where it is, never
// delivered. Symbolic links are refused, not followed.

// Inbox limits and defaults.
const (
	// DefaultInboxPoll is how often an inbox is read when its entry names
	// no inbox_poll.
	DefaultInboxPoll = 5 * time.Second
	// MinInboxPoll and MaxInboxPoll bound inbox_poll.
	MinInboxPoll = 100 * time.Millisecond
	MaxInboxPoll = time.Hour
	// MaxInboxFileBytes bounds one delivery file, as the webhook listener
	// bounds a body.
	MaxInboxFileBytes = 1 << 20
	// InboxDeliverTimeout bounds the wait for the host's answer to one
	// delivery; past it the file stays for the next pass.
	InboxDeliverTimeout = time.Minute
	// inboxExt is a delivery file's extension.
	inboxExt = ".json"
)

// InboxSourceName is the source an entry's inbox delivers on.
func InboxSourceName(scopeID, entryID string) string {
	return SourceName(scopeID, entryID) + "/inbox"
}

// deliveryIDPattern is what a delivery file's name must be before .json:
// a plain name an upstream's delivery ID fits, never a path.
var deliveryIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$`)

// inboxSpec is an entry's inbox as its config names it.
type inboxSpec struct {
	Dir  string
	Poll time.Duration
}

// parseInboxPoll reads inbox_poll: a Go duration within the bounds, or
// DefaultInboxPoll when empty.
func parseInboxPoll(s string) (time.Duration, error) {
	if s == "" {
		return DefaultInboxPoll, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < MinInboxPoll || d > MaxInboxPoll {
		return 0, fmt.Errorf("inbox_poll is a duration from %v to %v, such as 5s", MinInboxPoll, MaxInboxPoll)
	}
	return d, nil
}

// inboxSpec is the inbox an entry's config names: its directory
// resolved like the store's, and its poll.
func (x *extension) inboxSpec(stateDir string, cfg entryConfig) (inboxSpec, error) {
	if x.codec.version < 3 {
		return inboxSpec{}, errors.New("inbox_dir needs release 3 of notes")
	}
	if cfg.InboxDir == "" {
		return inboxSpec{}, errors.New("inbox_poll needs an inbox_dir")
	}
	poll, err := parseInboxPoll(cfg.InboxPoll)
	if err != nil {
		return inboxSpec{}, err
	}
	dir := cfg.InboxDir
	if !filepath.IsAbs(dir) {
		if stateDir == "" {
			return inboxSpec{}, errors.New("the host named no state directory, so inbox_dir must be absolute")
		}
		dir = filepath.Join(stateDir, dir)
	}
	return inboxSpec{Dir: filepath.Clean(dir), Poll: poll}, nil
}

// deliverFunc is ingress.deliver as a receiver calls it.
type deliverFunc func(ctx context.Context, p protocol.IngressDeliverParams) (protocol.IngressDeliverResult, error)

// inbox is one running receiver: a spool directory delivered on one
// source.
type inbox struct {
	source  string
	spec    inboxSpec
	drafts  func(source string, body []byte) ([]protocol.EventDraft, error)
	deliver deliverFunc
	logf    func(format string, args ...any)

	stop     chan struct{} // closed to stop after the delivery in hand
	stopOnce sync.Once
	done     chan struct{} // closed when the receiver has returned

	logged map[string]string // name -> the refusal last logged for it
}

// inboxPass is what one pass did, by file name.
type inboxPass struct {
	// Acknowledged are the deliveries the host accepted, whose files were
	// removed.
	Acknowledged []string
	// Kept are the deliveries left for the next pass: the host refused or
	// failed them, or its answer did not come.
	Kept []string
	// Refused are the files that are no delivery (their names, sizes,
	// kinds or contents), left alone and never delivered.
	Refused []string
}

// run reads the inbox every poll until stop or ctx ends. The first pass
// comes one poll after the configure that started the receiver, not
// during it: the host records the sources a configure registered only
// once it has the answer, and a delivery before that is refused (kept for
// the next pass, but a needless refusal at every start).
func (in *inbox) run(ctx context.Context) {
	defer close(in.done)
	t := time.NewTicker(in.spec.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-in.stop:
			return
		case <-t.C:
		}
		in.pass(ctx)
	}
}

// halt stops the receiver after the delivery in hand, without waiting:
// a delivery already sent is answered, and acknowledged, as usual.
func (in *inbox) halt() { in.stopOnce.Do(func() { close(in.stop) }) }

func (in *inbox) stopped() bool {
	select {
	case <-in.stop:
		return true
	default:
		return false
	}
}

// pass delivers every delivery the directory holds, in name order.
func (in *inbox) pass(ctx context.Context) inboxPass {
	var out inboxPass
	entries, err := os.ReadDir(in.spec.Dir)
	if err != nil {
		in.refuse(".", fmt.Sprintf("cannot read the inbox: %v", err))
		return out
	}
	for _, de := range entries {
		if ctx.Err() != nil || in.stopped() {
			break
		}
		name := de.Name()
		if strings.HasPrefix(name, ".") {
			continue // being written; renamed into place when done
		}
		events, err := in.read(name, de.Type())
		if err != nil {
			in.refuse(name, err.Error())
			out.Refused = append(out.Refused, name)
			continue
		}
		if in.deliverFile(ctx, name, events) {
			out.Acknowledged = append(out.Acknowledged, name)
		} else {
			out.Kept = append(out.Kept, name)
		}
	}
	return out
}

// read checks one directory entry and returns the Events of its
// delivery; an error says why the file is no delivery.
func (in *inbox) read(name string, typ fs.FileMode) ([]protocol.EventDraft, error) {
	id, ok := strings.CutSuffix(name, inboxExt)
	if !ok || !deliveryIDPattern.MatchString(id) {
		return nil, fmt.Errorf("not a delivery: a delivery file is named <delivery-id>%s, the ID 1 to 128 letters, digits or ._@- starting with a letter or digit", inboxExt)
	}
	if typ&fs.ModeSymlink != 0 {
		return nil, errors.New("a symbolic link: refused, not followed")
	}
	if !typ.IsRegular() {
		return nil, errors.New("not a regular file")
	}
	body, err := readDelivery(filepath.Join(in.spec.Dir, name))
	if err != nil {
		return nil, err
	}
	events, err := in.drafts(in.source, body)
	if err != nil {
		return nil, err
	}
	return events, nil
}

// readDelivery reads a delivery file without following a link (the name
// may have been swapped for one since the directory was read) and without
// blocking on a FIFO, up to MaxInboxFileBytes.
func readDelivery(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, errors.New("a symbolic link: refused, not followed")
		}
		return nil, fmt.Errorf("cannot open it: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st.Size() > MaxInboxFileBytes {
		return nil, fmt.Errorf("%d bytes, over the bound of %d", st.Size(), MaxInboxFileBytes)
	}
	body, err := io.ReadAll(io.LimitReader(f, MaxInboxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > MaxInboxFileBytes {
		return nil, fmt.Errorf("over the bound of %d bytes", MaxInboxFileBytes)
	}
	return body, nil
}

// deliverFile delivers one file's Events and acknowledges it (removes
// the file) once the host answered that every Event is accepted. It
// reports whether the file was acknowledged.
func (in *inbox) deliverFile(ctx context.Context, name string, events []protocol.EventDraft) bool {
	path := filepath.Join(in.spec.Dir, name)
	id := strings.TrimSuffix(name, inboxExt)
	testInboxHold(id)
	ctx, cancel := context.WithTimeout(ctx, InboxDeliverTimeout)
	defer cancel()
	p := protocol.IngressDeliverParams{Source: in.source, Events: events}
	res, err := in.deliver(ctx, p)
	switch {
	case err != nil:
		testInboxOutcome(id, "refused "+string(protocol.CodeOf(err)))
		in.logf("inbox %s: delivery %s kept for the next pass: %v", in.source, id, err)
		return false
	case len(res.Accepted) != len(events):
		testInboxOutcome(id, "refused answer")
		in.logf("inbox %s: delivery %s kept: the host answered %d outcomes for %d Events", in.source, id, len(res.Accepted), len(events))
		return false
	}
	added := 0
	for _, o := range res.Accepted {
		if o.Added {
			added++
		}
	}
	if err := removeDelivered(path); err != nil {
		// Accepted but not acknowledged: the next pass delivers it again,
		// which the host answers as a no-op.
		in.logf("inbox %s: delivery %s accepted, but removing it failed: %v", in.source, id, err)
		testInboxOutcome(id, fmt.Sprintf("accepted added=%d", added))
		return false
	}
	testInboxOutcome(id, fmt.Sprintf("accepted added=%d", added))
	in.logf("inbox %s: delivery %s acknowledged (%d Events, %d new)", in.source, id, len(events), added)
	delete(in.logged, name)
	return true
}

// removeDelivered acknowledges a delivery upstream: its file goes. One
// already gone (acknowledged by another pass) is no error.
func removeDelivered(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// refuse logs why a file is no delivery, once per name and reason, so a
// pass every few seconds does not repeat it.
func (in *inbox) refuse(name, why string) {
	if in.logged[name] == why {
		return
	}
	in.logged[name] = why
	in.logf("inbox %s: %s refused: %s", in.source, name, why)
}

// ---- the receivers of a generation ----

// inboxes are the running receivers, by source; a configure keeps those
// whose directory and poll are unchanged and starts or stops the rest.
type inboxes struct {
	mu      sync.Mutex
	running map[string]*inbox
	ctx     context.Context // ends at shutdown
	cancel  context.CancelFunc
}

// apply runs exactly the receivers want names (by source); dryRun starts
// none. Stopped receivers finish the delivery in hand.
func (x *extension) applyInboxes(host *sdk.Host, want map[string]inboxSpec, dryRun bool) {
	b := &x.inbox
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		b.ctx, b.cancel = context.WithCancel(context.Background())
	}
	if dryRun {
		want = nil
	}
	for src, in := range b.running {
		if spec, ok := want[src]; !ok || spec != in.spec {
			in.halt()
			delete(b.running, src)
		}
	}
	for src, spec := range want {
		if _, ok := b.running[src]; ok {
			continue
		}
		in := &inbox{source: src, spec: spec, drafts: x.drafts, deliver: host.IngressDeliver, logf: inboxLogf,
			stop: make(chan struct{}), done: make(chan struct{}), logged: map[string]string{}}
		if b.running == nil {
			b.running = map[string]*inbox{}
		}
		b.running[src] = in
		go in.run(b.ctx)
	}
}

// shutdown stops every receiver and waits, up to ctx, for the deliveries
// in hand to be answered and acknowledged.
func (x *extension) shutdown(ctx context.Context, _ *sdk.Host) error {
	b := &x.inbox
	b.mu.Lock()
	var waiting []*inbox
	for src, in := range b.running {
		in.halt()
		waiting = append(waiting, in)
		delete(b.running, src)
	}
	b.mu.Unlock()
	for _, in := range waiting {
		select {
		case <-in.done:
		case <-ctx.Done():
		}
	}
	if b.cancel != nil {
		b.cancel()
	}
	return nil
}

func inboxLogf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "notes: "+format+"\n", args...)
}

// ---- the inbox test hold ----

// TestInboxHoldEnv names the one delivery (its ID, the file name without
// .json) at which notes' inbox test hold stops a pass, just before its
// ingress.deliver leaves, when the daemon also grants TestHoldEnv's FIFO
// (settings.pass_env): a fault drill needs notes between deciding to
// deliver and delivering, and a barrier rather than a sleep to know it is
// there. notes writes "held <pid>\n" to the FIFO, reads one line back
// (the release), delivers, and writes how the host answered ("accepted
// added=N" or "refused CODE"). A process holds each delivery once. Without
// both variables nothing is held.
const TestInboxHoldEnv = "NOTES_TEST_INBOX_HOLD"

var testInboxHeld sync.Map // delivery ID -> struct{}: held once a process

// testInboxHold holds the pass at delivery id when the test hold names it.
func testInboxHold(id string) {
	fifo := os.Getenv(TestHoldEnv)
	if fifo == "" || os.Getenv(TestInboxHoldEnv) != id {
		return
	}
	if _, again := testInboxHeld.LoadOrStore(id, struct{}{}); again {
		return
	}
	if err := writeFIFO(fifo, fmt.Sprintf("held %d\n", os.Getpid())); err != nil {
		inboxLogf("inbox test hold: %v", err)
		return
	}
	f, err := os.Open(fifo) // blocks until the test opens it to release
	if err != nil {
		inboxLogf("inbox test hold: %v", err)
		return
	}
	var line [64]byte
	_, _ = f.Read(line[:])
	f.Close()
}

// testInboxOutcome tells the test how the held delivery id ended.
func testInboxOutcome(id, outcome string) {
	fifo := os.Getenv(TestHoldEnv)
	if fifo == "" || os.Getenv(TestInboxHoldEnv) != id {
		return
	}
	if v, ok := testInboxHeld.Load(id); !ok || v == "told" {
		return
	}
	testInboxHeld.Store(id, "told")
	if err := writeFIFO(fifo, outcome+"\n"); err != nil {
		inboxLogf("inbox test hold: %v", err)
	}
}

func writeFIFO(fifo, line string) error {
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // blocks until the test reads
	if err != nil {
		return err
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
