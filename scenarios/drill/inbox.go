package drill

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdInbox:
//
//	inbox held
//	inbox release [--want accepted|refused]
//
// held waits until notes' inbox test hold (notes.TestInboxHoldEnv, set
// with daemon start NOTES_TEST_INBOX_HOLD=ID and granted through
// settings.pass_env) stops a pass just before the delivery ID's
// ingress.deliver, and prints the holding process. release lets the
// delivery go and waits for notes to say how the host answered
// ("accepted added=N" or "refused CODE"), printed on stdout and checked
// against want (default accepted).
func cmdInbox(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "inbox")
	s := state(ts)
	usage := "usage: inbox held | inbox release [--want accepted|refused]"
	if len(args) == 0 {
		ts.Fatalf("%s", usage)
	}
	fifo := s.vars(HoldFIFOEnv)
	switch verb, rest := args[0], args[1:]; verb {
	case "held":
		if len(rest) != 0 {
			ts.Fatalf("%s", usage)
		}
		line, err := readFIFOLine(fifo, s.within)
		if err != nil {
			ts.Fatalf("inbox held: notes did not hold a delivery: %v", err)
		}
		var pid int
		if _, err := fmt.Sscanf(line, "held %d", &pid); err != nil {
			ts.Fatalf("inbox held: the hold FIFO said %q, want \"held PID\"", line)
		}
		s.progress("an inbox delivery held by notes (pid %d)", pid)
		fmt.Fprintf(ts.Stdout(), "held by pid %d\n", pid)
	case "release":
		want := "accepted"
		if len(rest) == 2 && rest[0] == "--want" && slices.Contains([]string{"accepted", "refused"}, rest[1]) {
			want, rest = rest[1], nil
		}
		if len(rest) != 0 {
			ts.Fatalf("%s", usage)
		}
		if err := writeFIFOLine(fifo, "release\n", s.within); err != nil {
			ts.Fatalf("inbox release: notes did not take the release: %v", err)
		}
		outcome, err := readFIFOLine(fifo, s.within)
		if err != nil {
			ts.Fatalf("inbox release: notes did not say how the delivery ended: %v", err)
		}
		outcome = strings.TrimSpace(outcome)
		s.progress("the held inbox delivery ended: %s", outcome)
		fmt.Fprintln(ts.Stdout(), outcome)
		if !strings.HasPrefix(outcome, want+" ") {
			ts.Fatalf("inbox release: the delivery ended %q, want %s", outcome, want)
		}
	default:
		ts.Fatalf("inbox: unknown verb %q\n%s", verb, usage)
	}
}

// readFIFOLine reads one line from the FIFO, whose open blocks until a
// writer comes, within the deadline.
func readFIFOLine(fifo string, within time.Duration) (string, error) {
	type result struct {
		line string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		line, err := bufio.NewReader(f).ReadString('\n')
		ch <- result{line: line, err: err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	select {
	case r := <-ch:
		return r.line, r.err
	case <-ctx.Done():
		unblockFIFO(fifo)
		return "", fmt.Errorf("nothing within %v", within)
	}
}

// writeFIFOLine writes line to the FIFO, whose open blocks until a reader
// comes, within the deadline.
func writeFIFOLine(fifo, line string, within time.Duration) error {
	ch := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			ch <- err
			return
		}
		_, err = f.WriteString(line)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		ch <- err
	}()
	select {
	case err := <-ch:
		return err
	case <-time.After(within):
		// A reader's open unblocks the writer's, which then writes to
		// nobody.
		if f, err := os.Open(fifo); err == nil {
			f.Close()
		}
		return fmt.Errorf("no reader within %v", within)
	}
}
