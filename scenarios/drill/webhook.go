package drill

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// answer is how a webhook request ended: an HTTP status and body, or no
// answer at all (the connection dropped: a killed daemon).
type answer struct {
	status int
	body   string
	err    error
}

func (a answer) String() string {
	if a.err != nil {
		return "no answer: " + a.err.Error()
	}
	return fmt.Sprintf("%d %s", a.status, strings.TrimSpace(a.body))
}

// wantStatus checks a against want: a status code (200), a class (2xx,
// 4xx, 5xx), "lost" (no HTTP answer), "fail" (anything but 2xx, lost
// included) or "any" (a drill whose daemon dies at a point that races the
// answer, and checks what was kept instead).
func wantStatus(a answer, want string) error {
	ok := false
	switch want {
	case "lost":
		ok = a.err != nil
	case "fail":
		ok = a.err != nil || a.status/100 != 2
	case "any":
		ok = true
	case "2xx", "4xx", "5xx":
		ok = a.err == nil && strconv.Itoa(a.status/100) == want[:1]
	default:
		code, err := strconv.Atoi(want)
		if err != nil {
			return fmt.Errorf("--want %q is not a status, 2xx, 4xx, 5xx, lost, fail or any", want)
		}
		ok = a.err == nil && a.status == code
	}
	if !ok {
		return fmt.Errorf("the webhook's answer is %v, want %s", a, want)
	}
	return nil
}

// heldRequest is a webhook request notes holds mid-handle (its test
// hold), whose answer comes later.
type heldRequest struct {
	pid  int // the notes process holding it
	done chan answer
}

// cmdWebhook:
//
//	webhook send [--hold NAME] [--want STATUS] SCOPE ENTRY FILE
//	webhook answer [--want STATUS] NAME
//
// send posts FILE to notes' webhook of entry ENTRY in scope SCOPE, signed
// as notes verifies it (HMAC-SHA256 under $NOTES_WEBHOOK_SECRET), and
// checks the answer (default want 2xx), printed on stdout. With --hold,
// notes holds the verified request (its test hold) and send returns once
// notes says it holds it; answer NAME then checks how it ended.
func cmdWebhook(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "webhook")
	s := state(ts)
	usage := "usage: webhook send [--hold NAME] [--want STATUS] SCOPE ENTRY FILE | webhook answer [--want STATUS] NAME"
	if len(args) == 0 {
		ts.Fatalf("%s", usage)
	}
	verb, rest := args[0], args[1:]
	want, hold := "2xx", ""
	for len(rest) >= 2 && strings.HasPrefix(rest[0], "--") {
		switch rest[0] {
		case "--want":
			want = rest[1]
		case "--hold":
			if verb != "send" {
				ts.Fatalf("%s", usage)
			}
			hold = rest[1]
		default:
			ts.Fatalf("webhook %s: unknown flag %s\n%s", verb, rest[0], usage)
		}
		rest = rest[2:]
	}
	if err := wantStatus(answer{status: 200}, want); err != nil && strings.Contains(err.Error(), "is not a status") {
		ts.Fatalf("webhook: %v", err)
	}
	switch verb {
	case "send":
		if len(rest) != 3 {
			ts.Fatalf("%s", usage)
		}
		url, err := s.webhookURL(rest[0], rest[1])
		ts.Check(err)
		body := []byte(ts.ReadFile(rest[2]))
		if hold == "" {
			a := s.post(url, body, false)
			fmt.Fprintln(ts.Stdout(), a)
			ts.Check(wantStatus(a, want))
			return
		}
		if _, dup := s.held[hold]; dup {
			ts.Fatalf("webhook send: a held request is already named %s", hold)
		}
		h, err := s.holdPost(url, body)
		ts.Check(err)
		s.held[hold] = h
		s.progress("webhook %s held by notes (pid %d)", hold, h.pid)
		fmt.Fprintf(ts.Stdout(), "held by pid %d\n", h.pid)
	case "answer":
		if len(rest) != 1 {
			ts.Fatalf("%s", usage)
		}
		h, ok := s.held[rest[0]]
		if !ok {
			ts.Fatalf("webhook answer: no held request is named %s", rest[0])
		}
		delete(s.held, rest[0])
		var a answer
		select {
		case a = <-h.done:
		case <-time.After(s.within):
			ts.Fatalf("webhook answer %s: no answer within %v", rest[0], s.within)
		}
		fmt.Fprintln(ts.Stdout(), a)
		ts.Check(wantStatus(a, want))
	default:
		ts.Fatalf("webhook: unknown verb %q\n%s", verb, usage)
	}
}

// webhookURL is the running daemon's URL of an entry's webhook.
func (s *script) webhookURL(scope, entry string) (string, error) {
	c, err := s.api()
	if err != nil {
		return "", err
	}
	ctx, cancel := s.ctx()
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		return "", err
	}
	if st.Paths.Webhook == "" {
		return "", fmt.Errorf("the daemon serves no webhook listener")
	}
	return "http://" + st.Paths.Webhook + notes.WebhookPath(scope, entry), nil
}

// post sends one signed delivery and returns how it ended.
func (s *script) post(url string, body []byte, hold bool) answer {
	ctx, cancel := s.ctx()
	defer cancel()
	return postSigned(ctx, url, []byte(s.vars(SecretEnv)), body, hold)
}

// postSigned posts body to url signed under secret; hold asks notes'
// test hold.
func postSigned(ctx context.Context, url string, secret, body []byte, hold bool) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set(notes.SignatureHeader, sdk.SignHMACSHA256(secret, body))
	if hold {
		req.Header.Set(notes.TestHoldHeader, "1")
	}
	resp, err := webhookClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return answer{err: err}
	}
	return answer{status: resp.StatusCode, body: string(b)}
}

// webhookClient keeps no idle connection, so a request after a daemon's
// restart never reuses one the killed daemon dropped.
var webhookClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// holdPost sends a delivery notes holds and returns once notes says so on
// the hold FIFO ("held <pid>").
func (s *script) holdPost(url string, body []byte) (*heldRequest, error) {
	h := &heldRequest{done: make(chan answer, 1)}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*s.within)
		defer cancel()
		h.done <- postSigned(ctx, url, []byte(s.vars(SecretEnv)), body, true)
	}()
	fifo := s.vars(HoldFIFOEnv)
	lines := make(chan string, 1)
	go func() {
		// The open blocks until notes opens the FIFO to write.
		f, err := os.Open(fifo)
		if err != nil {
			lines <- "error: " + err.Error()
			return
		}
		defer f.Close()
		line, _ := bufio.NewReader(f).ReadString('\n')
		lines <- line
	}()
	var line string
	select {
	case line = <-lines:
	case a := <-h.done:
		unblockFIFO(fifo)
		return nil, fmt.Errorf("notes answered before it held the request: %v", a)
	case <-time.After(s.within):
		unblockFIFO(fifo)
		return nil, fmt.Errorf("notes did not hold the request within %v", s.within)
	}
	if _, err := fmt.Sscanf(line, "held %d", &h.pid); err != nil {
		return nil, fmt.Errorf("the hold FIFO said %q, want \"held PID\"", line)
	}
	return h, nil
}

// unblockFIFO opens the FIFO to write, so a reader blocked in its open
// returns.
func unblockFIFO(fifo string) {
	if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
}
