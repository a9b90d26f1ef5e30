package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extensions/agent"
	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/host/daemon"
)

// SoakOptions say how Soak runs.
type SoakOptions struct {
	// Binary is the open-conduit executable.
	Binary string
	// Rounds is how many times the daemon is killed (default 20).
	Rounds int
	// Senders is how many concurrent webhook senders load it (default 4).
	Senders int
	// Seed makes the kill moments reproducible (0: a random seed, reported).
	Seed uint64
	// KillPoints, for a faultinject build, are kill points
	// (OPEN_CONDUIT_KILL_POINT values, NAME or NAME:N; without N a hit
	// the seed chooses) the even rounds take in turn, the odd ones being
	// killed from outside at a random moment. DefaultKillPoints are the
	// points a webhook's life passes.
	KillPoints []string
	// Within bounds each wait (DefaultWithin when zero).
	Within time.Duration
	// Dir is where the daemon's directories go (a new temporary directory,
	// removed at the end, when empty).
	Dir string
	// Progress hears a line per round.
	Progress io.Writer
}

// SoakReport is what a soak counted. It passes when Lost, Duplicated and
// the integrity problems are all zero.
type SoakReport struct {
	Seed    uint64 `json:"seed"`
	Rounds  int    `json:"rounds"`
	Senders int    `json:"senders"`
	// Kills counts SIGKILLs from outside; KillPointKills the rounds the
	// daemon killed itself at a kill point.
	Kills          int `json:"kills"`
	KillPointKills int `json:"kill_point_kills"`
	// Sent counts webhook requests; Acknowledged those answered 2xx;
	// Refused those answered otherwise (5xx while a package restarts, 4xx
	// never expected); NoAnswer those the kill cut off.
	Sent         int `json:"sent"`
	Acknowledged int `json:"acknowledged"`
	Refused      int `json:"refused"`
	NoAnswer     int `json:"no_answer"`
	// Deliveries counts the distinct notes ever acknowledged; Stored how
	// many of them the store holds; Lost those acknowledged but missing.
	Deliveries int `json:"deliveries"`
	Stored     int `json:"stored"`
	Lost       int `json:"lost"`
	// Events is the store's Events; Duplicated the deliveries accepted
	// more than once (an identity with two Events).
	Events     int `json:"events"`
	Duplicated int `json:"duplicated"`
	// Unexpected lists answers that are a bug whatever the kill (a 4xx, a
	// 2xx that names other Events than the same delivery did before).
	Unexpected []string `json:"unexpected,omitempty"`
	// Integrity is the doctor's store check (PRAGMA integrity_check) on the
	// last daemon: "ok" or its detail.
	Integrity string `json:"integrity"`
	// The operations: each delivery tagged "op" makes a Work whose run
	// (the agent) calls notes.add under its request ID, through the
	// toolbelt, while the daemon is killed around it; a killed attempt is
	// retried under the same request ID. OpWorks counts those Works (one
	// request ID each), OpSettled those that ended before the check and
	// OpRetried those run more than once (a kill cut an attempt short);
	// OpAcknowledged the request IDs a call was answered for; OpEffects
	// the notes notes.add indexed (its KV). OpLost counts acknowledged
	// calls whose note is missing, OpTwice the effects beyond one per
	// request ID (a note no request ID accounts for, or one request ID
	// answered with two notes).
	OpWorks        int     `json:"op_works"`
	OpSettled      int     `json:"op_settled"`
	OpRetried      int     `json:"op_retried"`
	OpAcknowledged int     `json:"op_acknowledged"`
	OpEffects      int     `json:"op_effects"`
	OpLost         int     `json:"op_lost"`
	OpTwice        int     `json:"op_twice"`
	Elapsed        float64 `json:"elapsed_seconds"`
}

// Passed reports whether nothing acknowledged was lost, nothing was
// accepted twice, nothing unexpected was answered and the store is intact.
func (r SoakReport) Passed() bool {
	return r.Lost == 0 && r.Duplicated == 0 && len(r.Unexpected) == 0 && r.Integrity == "ok" && r.Acknowledged > 0 &&
		r.OpLost == 0 && r.OpTwice == 0
}

// DefaultKillPoints are the kill points a webhook delivery's life passes,
// which a soak of a faultinject build takes in turn.
var DefaultKillPoints = []string{
	daemon.KillEventAcceptBefore, daemon.KillEventAcceptAfter,
	daemon.KillIngressAckBefore, daemon.KillIngressAckAfter,
}

// HasKillPoints reports whether bin was built with -tags faultinject.
func HasKillPoints(bin string) bool { return hasTag(bin, "faultinject") }

// soakConfig serves notes' signed webhook in scope soak, and routes the
// notes tagged "op" to Work the agent runs: one notes.add through the
// toolbelt, under the agent's request ID for it (<work id>/0), which a
// retried attempt calls again.
const soakConfig = `{
  "connections": [{"name": "hook", "type": "notes-webhook", "secret_refs": {"secret": "env:` + SecretEnv + `"}}],
  "scopes": [{"id": "soak", "connections": ["hook"], "entries": [{"id": "inbox", "type": "notes", "connection": "hook"}],
    "routes": [{"handler": "notes", "kind": "notes-review", "binding": "` + soakOpsBinding + `", "config": {"tag": "op"}}],
    "bindings": [{"name": "` + soakOpsBinding + `", "executor": "agent", "toolbelt": true, "operations": ["notes.add"],
      "executor_config": {"script": [{"call": "notes.add", "input": {"title": "soak"}}]}}]
  }]
}`

// soakOpsBinding is the binding of the soak's operation Works.
const soakOpsBinding = "ops"

// soakOpEvery: one new note in soakOpEvery is tagged "op".
const soakOpEvery = 8

// Soak loads the daemon with signed webhooks from several senders while
// it is killed with SIGKILL at random moments (and, given KillPoints, at
// kill points) and restarted, round after round; then it checks every
// acknowledged delivery is in the store once, none was accepted twice, and
// the store passes its integrity check. Each sender redelivers what was
// not acknowledged (as a service does) and, now and then, what was.
func Soak(ctx context.Context, opts SoakOptions) (SoakReport, error) {
	if opts.Rounds <= 0 {
		opts.Rounds = 20
	}
	if opts.Senders <= 0 {
		opts.Senders = 4
	}
	if opts.Within == 0 {
		opts.Within = DefaultWithin
	}
	if opts.Seed == 0 {
		opts.Seed = rand.Uint64()
	}
	start := time.Now()
	rep := SoakReport{Seed: opts.Seed, Rounds: opts.Rounds, Senders: opts.Senders}
	dir := opts.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "soak")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	vars := map[string]string{SecretEnv: drillSecret}
	s := &script{bin: opts.Binary, work: dir, configDir: filepath.Join(dir, "config"), stateDir: filepath.Join(dir, "state"),
		within: opts.Within, vars: func(k string) string { return vars[k] }}
	for _, d := range []string{s.configDir, s.stateDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return rep, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(soakConfig), 0o600); err != nil {
		return rep, err
	}
	nd := filepath.Join(s.configDir, "extensions", notes.Name)
	if err := os.MkdirAll(nd, 0o755); err != nil {
		return rep, err
	}
	if err := os.WriteFile(filepath.Join(nd, "open-conduit-extension.json"), bundled[notes.Name](), 0o644); err != nil {
		return rep, err
	}
	ad := filepath.Join(s.configDir, "extensions", agent.Name)
	if err := os.MkdirAll(ad, 0o755); err != nil {
		return rep, err
	}
	if err := os.WriteFile(filepath.Join(ad, "open-conduit-extension.json"), agent.Extension().Manifest, 0o644); err != nil {
		return rep, err
	}
	defer s.shutdown()

	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	ledger := newLedger()
	for round := 1; round <= opts.Rounds; round++ {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		var point string
		if len(opts.KillPoints) > 0 && round%2 == 0 {
			point = opts.KillPoints[(round/2-1)%len(opts.KillPoints)]
			if !strings.Contains(point, ":") {
				// Which hit: a moment in the load, chosen by the seed.
				point += ":" + strconv.Itoa(1+rng.IntN(4*opts.Senders))
			}
		}
		args := []string{}
		if point != "" {
			args = append(args, KillPointEnv+"="+point)
		}
		if err := s.start(args); err != nil {
			if point != "" && s.d == nil {
				// The daemon may reach its kill point before it is ready
				// (a migration, an adoption): that is a round too.
				rep.KillPointKills++
				if err := s.startClean(); err != nil {
					return rep, fmt.Errorf("round %d: restart after kill point %s: %w", round, point, err)
				}
			} else {
				return rep, fmt.Errorf("round %d: %w", round, err)
			}
		}
		url, err := s.webhookURL("soak", "inbox")
		if err != nil {
			return rep, fmt.Errorf("round %d: %w", round, err)
		}
		// The kill comes after a random number of requests: a moment in
		// the load, chosen without a clock.
		killAfter := 1 + rng.IntN(8*opts.Senders)
		if point != "" {
			killAfter = 100 * opts.Senders // room for the point to fire first
		}
		killedBy := s.load(url, round, opts.Senders, killAfter, point != "", rng.Uint64(), ledger, &rep)
		switch killedBy {
		case "point":
			rep.KillPointKills++
		default:
			rep.Kills++
		}
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "round %d/%d: %s kill, %d sent, %d acknowledged so far\n",
				round, opts.Rounds, killedBy, rep.Sent, rep.Acknowledged)
		}
	}
	// The last daemon: every acknowledged delivery must be there once.
	if err := s.startClean(); err != nil {
		return rep, fmt.Errorf("the final start: %w", err)
	}
	if err := ledger.verify(s, &rep); err != nil {
		return rep, err
	}
	if err := verifyOps(s, &rep); err != nil {
		return rep, err
	}
	if err := s.stop(); err != nil {
		return rep, fmt.Errorf("the final stop: %w", err)
	}
	rep.Elapsed = time.Since(start).Seconds()
	return rep, nil
}

// startClean starts a daemon with no kill point.
func (s *script) startClean() error {
	if s.d != nil {
		return errors.New("a daemon still runs")
	}
	return s.start(nil)
}

// ledger is what the senders were told: each acknowledged delivery and
// the Events its answer named.
type ledger struct {
	mu    sync.Mutex
	acked map[string][]string // note ID -> the Event IDs its first 2xx named
}

func newLedger() *ledger { return &ledger{acked: map[string][]string{}} }

// webhookAnswer is the part of the listener's 2xx answer the soak reads.
type webhookAnswer struct {
	Accepted int      `json:"accepted"`
	Events   []string `json:"events"`
}

// load runs the senders until the daemon dies: killed from outside after
// killAfter requests, or by itself at its kill point (atPoint). Each sender
// sends new notes and redelivers those not acknowledged; it stops at the
// first request after the daemon is gone. It returns "random" or "point".
func (s *script) load(url string, round, senders, killAfter int, atPoint bool, seed uint64, l *ledger, rep *SoakReport) string {
	var (
		mu      sync.Mutex
		sent    int
		killed  = make(chan struct{})
		once    sync.Once
		wg      sync.WaitGroup
		secret  = []byte(s.vars(SecretEnv))
		outcome = "random"
	)
	kill := func() {
		once.Do(func() {
			if !atPoint {
				_ = s.d.cmd.Process.Signal(syscall.SIGKILL)
			}
			close(killed)
		})
	}
	d := s.d
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			var pending []string // notes not acknowledged yet
			n := 0
			for {
				select {
				case <-d.exited:
					return
				default:
				}
				var id string
				if len(pending) > 0 && rng.IntN(2) == 0 {
					id = pending[0]
				} else if acked := l.someAcked(rng); acked != "" && rng.IntN(8) == 0 {
					id = acked // a redelivery of an acknowledged note
				} else {
					n++
					id = fmt.Sprintf("r%d-s%d-%d", round, i, n)
					if rng.IntN(soakOpEvery) == 0 {
						id += opSuffix
					}
					pending = append(pending, id)
				}
				body := soakBody(id)
				mu.Lock()
				sent++
				due := sent == killAfter
				mu.Unlock()
				if due {
					// The other senders' requests are in flight.
					kill()
				}
				ctx, cancel := context.WithTimeout(context.Background(), s.within)
				a := postSigned(ctx, url, secret, []byte(body), false)
				cancel()
				l.record(rep, id, a)
				if a.err == nil && a.status/100 == 2 {
					pending = slices.DeleteFunc(pending, func(p string) bool { return p == id })
				}
				if a.err != nil {
					return // the daemon is gone
				}
			}
		}()
	}
	select {
	case <-d.exited:
		outcome = "point"
		if !atPoint {
			outcome = "unexpected exit"
		}
		once.Do(func() { close(killed) })
	case <-killed:
		if atPoint {
			// The kill point did not fire within the load: kill from
			// outside so the round ends.
			_ = d.cmd.Process.Signal(syscall.SIGKILL)
			outcome = "random (the kill point did not fire)"
		}
	}
	<-d.exited
	wg.Wait()
	s.reap()
	mu.Lock()
	rep.Sent += sent
	mu.Unlock()
	return outcome
}

// record counts one answer and keeps an acknowledgement's Events.
func (l *ledger) record(rep *SoakReport, id string, a answer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case a.err != nil:
		rep.NoAnswer++
		return
	case a.status/100 == 4:
		rep.Refused++
		rep.Unexpected = append(rep.Unexpected, fmt.Sprintf("%s: %v", id, a))
		return
	case a.status/100 != 2:
		rep.Refused++
		return
	}
	rep.Acknowledged++
	var ans webhookAnswer
	if err := json.Unmarshal([]byte(a.body), &ans); err != nil || len(ans.Events) != 1 {
		rep.Unexpected = append(rep.Unexpected, fmt.Sprintf("%s: a 2xx that names no one Event: %v", id, a))
		return
	}
	if before, ok := l.acked[id]; ok && !slices.Equal(before, ans.Events) {
		rep.Unexpected = append(rep.Unexpected, fmt.Sprintf("%s: acknowledged as %v, then as %v", id, before, ans.Events))
		return
	}
	l.acked[id] = ans.Events
}

// someAcked is an acknowledged note, or "" when none is yet.
func (l *ledger) someAcked(rng *rand.Rand) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.acked) == 0 {
		return ""
	}
	k := rng.IntN(len(l.acked))
	for id := range l.acked {
		if k == 0 {
			return id
		}
		k--
	}
	return ""
}

// verify reads the whole log and the doctor's store check from the
// running daemon and fills the report's counts.
func (l *ledger) verify(s *script, rep *SoakReport) error {
	ctx, cancel := s.ctx()
	defer cancel()
	byDelivery := map[string][]string{}
	var after int64
	for {
		page, err := s.c.Events(ctx, client.EventQuery{Scope: "soak", After: after, Limit: client.MaxPageLimit})
		if err != nil {
			return err
		}
		for _, e := range page.Events {
			rep.Events++
			byDelivery[e.DeliveryID] = append(byDelivery[e.DeliveryID], e.ID)
		}
		if page.Next == 0 {
			break
		}
		after = page.Next
	}
	for _, ids := range byDelivery {
		if len(ids) > 1 {
			rep.Duplicated++
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	rep.Deliveries = len(l.acked)
	stored := map[string]bool{}
	for _, ids := range byDelivery {
		for _, id := range ids {
			stored[id] = true
		}
	}
	for note, evs := range l.acked {
		if stored[evs[0]] {
			rep.Stored++
			continue
		}
		rep.Lost++
		if len(rep.Unexpected) < 20 {
			rep.Unexpected = append(rep.Unexpected, fmt.Sprintf("%s: acknowledged as %s, not in the store", note, evs[0]))
		}
	}
	doc, err := s.c.Doctor(ctx, false)
	if err != nil {
		return err
	}
	rep.Integrity = "no store check in doctor's report"
	for _, c := range doc.Checks {
		if c.Name == "store" {
			rep.Integrity = c.Status
			if c.Status != client.CheckOK {
				rep.Integrity = strings.TrimSpace(c.Status + ": " + c.Detail)
			}
		}
	}
	return nil
}

// opSuffix ends the ID of a note whose delivery makes an operation Work.
const opSuffix = "-op"

// soakBody is the delivery of note id: the same content every time it
// is sent, tagged "op" when the note makes an operation Work.
func soakBody(id string) string {
	if strings.HasSuffix(id, opSuffix) {
		return fmt.Sprintf(`{"notes":[{"id":%q,"rev":"1","title":"soak","tags":["op"]}]}`, id)
	}
	return fmt.Sprintf(`{"notes":[{"id":%q,"rev":"1","title":"soak"}]}`, id)
}

// verifyOps lets the running daemon settle the operation Works (each
// ends once its notes.add was answered, or its attempts ran out), then
// counts, from the agent's transcript and notes' KV, the acknowledged
// calls, their effects, those lost and those made twice.
func verifyOps(s *script, rep *SoakReport) error {
	settle, stop := s.ctx()
	works, err := settleOps(settle, s.c)
	stop()
	if err != nil {
		return err
	}
	ctx, cancel := s.ctx()
	defer cancel()
	acked, err := acknowledgedOps(filepath.Join(s.stateDir, "executors", agent.Name, agent.TranscriptFile))
	if err != nil {
		return err
	}
	effects := map[string]bool{}
	count := -1
	after := ""
	for {
		page, err := s.c.KV(ctx, client.KVQuery{Package: notes.Name, Namespace: notes.NamespaceIndex, After: after, Limit: client.MaxPageLimit})
		if err != nil {
			return err
		}
		for _, e := range page.Entries {
			if id, ok := strings.CutPrefix(e.Key, "note/"); ok {
				effects[id] = true
			} else if e.Key == "count" {
				var c struct {
					Notes int `json:"notes"`
				}
				if err := json.Unmarshal(e.Value, &c); err != nil {
					return fmt.Errorf("notes' note count: %w", err)
				}
				count = c.Notes
			}
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	attempts := map[string]int{}
	for _, w := range works {
		xs, err := s.c.Executions(ctx, w.ID)
		if err != nil {
			return err
		}
		attempts[w.ID] = len(xs)
	}
	countOps(rep, works, attempts, acked, effects, count)
	return nil
}

// countOps fills the report's operation counts: works are the operation
// Works with their attempts, acked the notes each request ID's calls were
// answered with, effects the notes indexed and count notes' own count of
// them (-1 for none).
func countOps(rep *SoakReport, works []client.Work, attempts map[string]int, acked map[string][]string, effects map[string]bool, count int) {
	rep.OpWorks = len(works)
	expected := map[string]string{} // note ID -> the request ID whose note it is
	for _, w := range works {
		if terminalWork(w.State) {
			rep.OpSettled++
		}
		if attempts[w.ID] > 1 {
			rep.OpRetried++
		}
		req := w.ID + "/0"
		expected[notes.AddedNoteID(req)] = req
	}
	rep.OpEffects = len(effects)
	if len(effects) > 0 && count != len(effects) {
		rep.Unexpected = append(rep.Unexpected, fmt.Sprintf("notes counts %d notes, its index holds %d", count, len(effects)))
	}
	for _, id := range slices.Sorted(maps.Keys(effects)) {
		if _, ok := expected[id]; !ok {
			rep.OpTwice++
			if len(rep.Unexpected) < 20 {
				rep.Unexpected = append(rep.Unexpected, fmt.Sprintf("note %s was added by no request ID of an operation Work: an effect made again", id))
			}
		}
	}
	for _, req := range slices.Sorted(maps.Keys(acked)) {
		got := acked[req]
		rep.OpAcknowledged++
		if len(got) > 1 {
			rep.OpTwice++
			rep.Unexpected = append(rep.Unexpected, fmt.Sprintf("request %s was answered with notes %v", req, got))
		}
		for _, note := range got {
			if note != notes.AddedNoteID(req) {
				rep.Unexpected = append(rep.Unexpected, fmt.Sprintf("request %s was answered with note %s, not its own", req, note))
			}
			if !effects[note] {
				rep.OpLost++
				if len(rep.Unexpected) < 20 {
					rep.Unexpected = append(rep.Unexpected, fmt.Sprintf("request %s was answered with note %s, which is not in notes' index", req, note))
				}
			}
		}
	}
}

// settleOps waits, on the change stream, until every operation Work is
// settled or ctx ends, and returns them as they are then.
func settleOps(ctx context.Context, c *client.Client) ([]client.Work, error) {
	var seen int64
	for {
		var ops []client.Work
		open := map[string]bool{}
		after := ""
		for {
			page, err := c.Works(ctx, client.WorkQuery{Scope: "soak", After: after, Limit: client.MaxPageLimit})
			if err != nil {
				return nil, err
			}
			for _, w := range page.Works {
				if w.Binding != "soak/"+soakOpsBinding { // bindings are named in their scope
					continue
				}
				ops = append(ops, w)
				if !terminalWork(w.State) {
					open[w.ID] = true
				}
			}
			if page.Next == "" {
				break
			}
			after = page.Next
		}
		if len(open) == 0 {
			return ops, nil
		}
		// A Work that settles after the list above has a later change than
		// any seen so far.
		_, err := c.WaitFor(ctx, client.ChangeQuery{After: seen, Scope: "soak"}, func(ch client.Change) bool {
			seen = ch.Seq
			return ch.Work != nil && open[ch.Work.ID] && terminalWork(ch.Work.State)
		})
		if ctx.Err() != nil {
			return ops, nil // reported as not settled
		}
		if err != nil {
			return nil, err
		}
	}
}

func terminalWork(state string) bool {
	return state == "done" || state == "failed" || state == "cancelled"
}

// acknowledgedOps reads the agent's transcript: the notes each
// request ID's notes.add calls were answered with. A line a kill cut
// short is no answer.
func acknowledgedOps(path string) (map[string][]string, error) {
	out := map[string][]string{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		var e agent.Entry
		if json.Unmarshal([]byte(line), &e) != nil || e.Call != notes.OpAdd || e.Verdict != agent.VerdictOK {
			continue
		}
		var res notes.AddOutput
		if json.Unmarshal(e.Result, &res) != nil || res.Note == "" {
			continue
		}
		if !slices.Contains(out[e.RequestID], res.Note) {
			out[e.RequestID] = append(out[e.RequestID], res.Note)
		}
	}
	return out, nil
}
