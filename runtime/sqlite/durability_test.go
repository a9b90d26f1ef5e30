package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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
	drillSeedEnv  = "OPEN_CONDUIT_SQLITE_DRILL_SEED"
	drillSource   = "drill"
	drillNS       = "drill"
	drillRounds   = 20
	drillMaxAcks  = 40
)

func drillKey(n int64) string { return fmt.Sprintf("n/%08d", n) }

// runDrillChild commits numbered writes until it is killed: each
// transaction accepts Events first..last, each with a KV record naming
// it, and "ack last" is printed only after the commit returned. It exits when its stdin
// closes, so a dead parent never leaves it running.
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
	ctx := context.Background()
	for {
		var last int64
		err := s.Transact(ctx, func(tx runtime.Tx) error {
			latest, err := tx.LatestSequence()
			if err != nil {
				return err
			}
			// Transactions of 1 to 41 events, so a kill also lands in
			// the middle of large ones.
			first := latest + 1
			size := 1 + (first%5)*10
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
				err = tx.KVCommit(runtime.KVBatch{
					Preconditions: []runtime.KVPrecondition{{Namespace: drillNS, Key: drillKey(n), Absent: true}},
					Puts:          []runtime.KVPut{{Namespace: drillNS, Key: drillKey(n), Value: []byte(ev.ID)}},
				})
				if err != nil {
					return err
				}
				last = n
			}
			return nil
		})
		if err != nil {
			fail(err)
		}
		if _, err := fmt.Fprintf(os.Stdout, "ack %d\n", last); err != nil {
			fail(err)
		}
	}
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
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), drillChildEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())

		lines := bufio.NewScanner(stdout)
		for i := 0; i < kill; i++ {
			if !lines.Scan() {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("round %d: the child stopped after %d acks: %v\nstderr:\n%s", round, i, lines.Err(), stderr.String())
			}
			n, err := strconv.ParseInt(strings.TrimPrefix(lines.Text(), "ack "), 10, 64)
			require.NoError(t, err, "round %d: line %q", round, lines.Text())
			// Acks only grow (a child may have committed a transaction
			// it died before acknowledging).
			require.Greater(t, n, acked, "round %d: ack %d after ack %d", round, n, acked)
			acked = n
		}
		require.NoError(t, cmd.Process.Kill()) // SIGKILL
		cmd.Wait()
		stdin.Close()
		t.Logf("round %d: killed after %d acks (last ack %d)", round, kill, acked)
	}

	s := openStore(t, dir)
	ctx := t.Context()
	require.NoError(t, s.Check(ctx), "PRAGMA integrity_check")
	err := s.View(ctx, func(tx runtime.ReadTx) error {
		latest, err := tx.LatestSequence()
		require.NoError(t, err)
		require.GreaterOrEqual(t, latest, acked, "acknowledged events are missing")
		t.Logf("%d events acknowledged, %d committed", acked, latest)

		// Every event is there, in one contiguous run of sequences, each
		// with its KV record.
		var want int64 = 1
		for after := int64(0); ; {
			page, err := tx.Events(after, runtime.MaxPageLimit)
			require.NoError(t, err)
			if len(page) == 0 {
				break
			}
			for _, ev := range page {
				require.Equal(t, want, ev.Sequence, "sequences must be contiguous")
				require.Equal(t, strconv.FormatInt(want, 10), ev.DeliveryID)
				entry, found, err := tx.KVGet(drillNS, drillKey(want))
				require.NoError(t, err)
				require.True(t, found, "event %d committed without its KV record", want)
				require.Equal(t, ev.ID, string(entry.Value))
				want++
			}
			after = page[len(page)-1].Sequence
		}
		require.Equal(t, latest+1, want)

		// And no KV record without its event.
		records := 0
		for after := ""; ; {
			page, err := tx.KVList(drillNS, "n/", after, runtime.MaxPageLimit)
			require.NoError(t, err)
			if len(page) == 0 {
				break
			}
			records += len(page)
			after = page[len(page)-1].Key
		}
		assert.Equal(t, int(latest), records, "KV records without their event")
		return nil
	})
	require.NoError(t, err)
}
