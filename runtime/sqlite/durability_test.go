package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

const (
	drillChildEnv = "OPEN_CONDUIT_SQLITE_DRILL_DIR"
	drillModeEnv  = "OPEN_CONDUIT_SQLITE_DRILL_MODE"
	drillSeedEnv  = "OPEN_CONDUIT_SQLITE_DRILL_SEED"
	drillSource   = "drill"
	drillNS       = "drill"
	drillRounds   = 20
	drillMaxAcks  = 25

	// drillSplit is the negative control's child: it commits each batch's
	// Events and their KV records in two transactions, saying "between N"
	// in between. After its third "between" it stops there until killed,
	// which leaves exactly the half-applied state the drill must see.
	drillSplit = "split"

	// drillDeferred's child commits numbered KV records with
	// TransactDeferSync, saying "ack N" after each commit returned;
	// drillDeferredEarly's, its negative control, acknowledges its third
	// record before committing it and stops there until killed.
	drillDeferred      = "deferred"
	drillDeferredEarly = "deferred-early"
	drillDeferredNS    = "deferred"
)

// runDeferredChild is the child of the deferred-sync drill.
func runDeferredChild(s *sqlite.Store, early bool, fail func(error)) {
	ctx := context.Background()
	var next int64
	if err := s.View(ctx, func(tx runtime.ReadTx) error {
		page, err := tx.KVList(drillDeferredNS, "n/", "", runtime.MaxPageLimit)
		next = int64(len(page)) + 1 // the drill's rounds stay under a page
		return err
	}); err != nil {
		fail(err)
	}
	for ; ; next++ {
		if early && next%3 == 0 {
			fmt.Fprintf(os.Stdout, "ack %d\n", next)
			select {} // until killed
		}
		err := s.TransactDeferSync(ctx, func(tx runtime.Tx) error {
			return tx.KVCommit(runtime.KVBatch{
				Preconditions: []runtime.KVPrecondition{{Namespace: drillDeferredNS, Key: drillKey(next), Absent: true}},
				Puts:          []runtime.KVPut{{Namespace: drillDeferredNS, Key: drillKey(next), Value: []byte("v")}},
			})
		})
		if err != nil {
			fail(err)
		}
		if _, err := fmt.Fprintf(os.Stdout, "ack %d\n", next); err != nil {
			fail(err)
		}
	}
}

// verifyDeferredDrill reopens dir and proves that the records run 1..n
// without a gap and that every acknowledged one is there.
func verifyDeferredDrill(ctx context.Context, dir string, acked int64) (int64, error) {
	s, err := sqlite.Open(dir)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	if err := s.Check(ctx); err != nil {
		return 0, err
	}
	var n int64
	err = s.View(ctx, func(tx runtime.ReadTx) error {
		page, err := tx.KVList(drillDeferredNS, "n/", "", runtime.MaxPageLimit)
		if err != nil {
			return err
		}
		for i, en := range page {
			if en.Key != drillKey(int64(i)+1) {
				return fmt.Errorf("record %s where %s was due", en.Key, drillKey(int64(i)+1))
			}
		}
		n = int64(len(page))
		if n < acked {
			return fmt.Errorf("acknowledged deferred commits are missing: %d records, last ack %d", n, acked)
		}
		return nil
	})
	return n, err
}

func drillKey(n int64) string { return fmt.Sprintf("n/%08d", n) }

// runDrillChild commits numbered writes until it is killed: each
// transaction accepts Events first..last, each with a KV record naming it,
// and "ack last" is printed only after the commit returned. It exits when
// its stdin closes, so a dead parent never leaves it running.
func runDrillChild(dir string) {
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "drill child:", err)
		os.Exit(1)
	}
	s, err := sqlite.Open(dir)
	if err != nil {
		fail(err)
	}
	if mode := os.Getenv(drillModeEnv); mode == drillDeferred || mode == drillDeferredEarly {
		runDeferredChild(s, mode == drillDeferredEarly, fail)
		return
	}
	split := os.Getenv(drillModeEnv) == drillSplit
	ctx := context.Background()
	for batch := 0; ; batch++ {
		var events []runtime.Event
		acceptBatch := func(tx runtime.Tx) error {
			latest, err := tx.LatestSequence()
			if err != nil {
				return err
			}
			// Transactions of 1 to 41 events, so a kill also lands in the
			// middle of large ones.
			first := latest + 1
			size := 1 + (first%5)*10
			events = events[:0]
			for n := first; n < first+size; n++ {
				ev, added, err := tx.AcceptEvent(runtime.Envelope{
					Source: drillSource, DeliveryID: strconv.FormatInt(n, 10), ScopeID: "drill",
					Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)),
				})
				if err != nil {
					return err
				}
				if !added || ev.Sequence != n {
					return fmt.Errorf("event %d: added=%v sequence=%d", n, added, ev.Sequence)
				}
				events = append(events, ev)
			}
			return nil
		}
		putRecords := func(tx runtime.Tx) error {
			for _, ev := range events {
				err := tx.KVCommit(runtime.KVBatch{
					Preconditions: []runtime.KVPrecondition{{Namespace: drillNS, Key: drillKey(ev.Sequence), Absent: true}},
					Puts:          []runtime.KVPut{{Namespace: drillNS, Key: drillKey(ev.Sequence), Value: []byte(ev.ID)}},
				})
				if err != nil {
					return err
				}
			}
			return nil
		}
		if split {
			if err := s.Transact(ctx, acceptBatch); err != nil {
				fail(err)
			}
			fmt.Fprintf(os.Stdout, "between %d\n", events[len(events)-1].Sequence)
			if batch == 2 {
				select {} // until killed
			}
			err = s.Transact(ctx, putRecords)
		} else {
			err = s.Transact(ctx, func(tx runtime.Tx) error {
				if err := acceptBatch(tx); err != nil {
					return err
				}
				return putRecords(tx)
			})
		}
		if err != nil {
			fail(err)
		}
		if _, err := fmt.Fprintf(os.Stdout, "ack %d\n", events[len(events)-1].Sequence); err != nil {
			fail(err)
		}
	}
}

// drillRound starts a child on dir, reads its lines until stop says so,
// then kills it with SIGKILL. It returns the last acknowledged number
// (lastAck if none came) and checks that acks only grow.
func drillRound(t *testing.T, dir, mode string, lastAck int64, stop func(line string, acks int) bool) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), drillChildEnv+"="+dir, drillModeEnv+"="+mode)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Wait()
	defer cmd.Process.Kill() // SIGKILL

	lines := bufio.NewScanner(stdout)
	for acks := 0; ; {
		if !lines.Scan() {
			t.Fatalf("the child stopped after %d acks: %v\nstderr:\n%s", acks, lines.Err(), stderr.String())
		}
		line := lines.Text()
		if n, ok := strings.CutPrefix(line, "ack "); ok {
			num, err := strconv.ParseInt(n, 10, 64)
			require.NoError(t, err, "line %q", line)
			// Acks only grow (a child may have committed a transaction it
			// died before acknowledging).
			require.Greater(t, num, lastAck, "ack %d after ack %d", num, lastAck)
			lastAck = num
			acks++
		}
		if stop(line, acks) {
			return lastAck
		}
	}
}

// verifyDrill reopens dir and proves that every acknowledged write is
// present, that each Event has its KV record and each record its Event,
// that sequences run 1..latest without a gap, and that SQLite's integrity
// check passes.
func verifyDrill(ctx context.Context, dir string, acked int64) (latest int64, err error) {
	s, err := sqlite.Open(dir)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	if err := s.Check(ctx); err != nil {
		return 0, err
	}
	err = s.View(ctx, func(tx runtime.ReadTx) error {
		latest, err = tx.LatestSequence()
		if err != nil {
			return err
		}
		if latest < acked {
			return fmt.Errorf("acknowledged events are missing: latest sequence %d, last ack %d", latest, acked)
		}
		want := int64(1)
		for after := int64(0); ; {
			page, err := tx.Events(after, runtime.MaxPageLimit)
			if err != nil {
				return err
			}
			if len(page) == 0 {
				break
			}
			for _, ev := range page {
				if ev.Sequence != want || ev.DeliveryID != strconv.FormatInt(want, 10) {
					return fmt.Errorf("sequence %d (delivery %s) where %d was due: the log is not contiguous", ev.Sequence, ev.DeliveryID, want)
				}
				entry, found, err := tx.KVGet(drillNS, drillKey(want))
				if err != nil {
					return err
				}
				if !found || string(entry.Value) != ev.ID {
					return fmt.Errorf("half-applied write: event %d committed without its KV record", want)
				}
				want++
			}
			after = page[len(page)-1].Sequence
		}
		if want != latest+1 {
			return fmt.Errorf("the log holds %d events, latest sequence %d", want-1, latest)
		}
		records := int64(0)
		for after := ""; ; {
			page, err := tx.KVList(drillNS, "n/", after, runtime.MaxPageLimit)
			if err != nil {
				return err
			}
			if len(page) == 0 {
				break
			}
			records += int64(len(page))
			after = page[len(page)-1].Key
		}
		if records != latest {
			return fmt.Errorf("half-applied write: %d KV records for %d events", records, latest)
		}
		return nil
	})
	return latest, err
}

// TestDurabilityDrill kills a committing child with SIGKILL at random
// points, round after round on one state directory, then proves that every
// acknowledged write survived, that nothing is half applied and that the
// database is intact.
func TestDurabilityDrill(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(drillSeedEnv); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("seed %d (set %s to replay)", seed, drillSeedEnv)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()

	var acked int64
	for round := range drillRounds {
		kill := 1 + rng.IntN(drillMaxAcks)
		acked = drillRound(t, dir, "", acked, func(_ string, acks int) bool { return acks == kill })
		t.Logf("round %d: killed after %d acks (last ack %d)", round, kill, acked)
	}
	committed, err := verifyDrill(t.Context(), dir, acked)
	require.NoError(t, err)
	t.Logf("%d events acknowledged, %d committed, all intact", acked, committed)
}

// TestDurabilityDrillSeesHalfAppliedWrites is the drill's negative control:
// a child that commits an Event and its KV record in separate transactions,
// killed exactly between the two, must fail the drill's verification.
func TestDurabilityDrillSeesHalfAppliedWrites(t *testing.T) {
	dir := t.TempDir()
	acked := drillRound(t, dir, drillSplit, 0, func(line string, acks int) bool {
		return acks >= 2 && strings.HasPrefix(line, "between ")
	})
	_, err := verifyDrill(t.Context(), dir, acked)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "half-applied write")
	assert.False(t, errors.Is(err, runtime.ErrInvalid))
}

// TestDurabilityDrillDeferredSync kills a child committing with
// TransactDeferSync: a killed process loses no commit it acknowledged
// (the log is written before the commit returns, only its fsync waits).
func TestDurabilityDrillDeferredSync(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	dir := t.TempDir()
	var acked int64
	for range 5 {
		kill := 1 + rng.IntN(drillMaxAcks)
		acked = drillRound(t, dir, drillDeferred, acked, func(_ string, acks int) bool { return acks == kill })
	}
	n, err := verifyDeferredDrill(t.Context(), dir, acked)
	require.NoError(t, err)
	t.Logf("%d deferred commits acknowledged, %d kept", acked, n)
}

// TestDurabilityDrillDeferredSeesALostAck is its negative control: a child
// that acknowledges a record before committing it, killed there, fails the
// verification.
func TestDurabilityDrillDeferredSeesALostAck(t *testing.T) {
	dir := t.TempDir()
	acked := drillRound(t, dir, drillDeferredEarly, 0, func(_ string, acks int) bool { return acks == 3 })
	_, err := verifyDeferredDrill(t.Context(), dir, acked)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "acknowledged deferred commits are missing")
}
