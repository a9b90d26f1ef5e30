package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// DefaultWebhookListen is the listener's address when
// settings.webhooks.listen is empty: loopback, a port the system picks
// (status reports it).
const DefaultWebhookListen = "127.0.0.1:0"

// MaxWebhookBody bounds a webhook request's body: 1 MiB, well under the
// protocol's message bound once base64 (4/3) and the envelope are added.
// A larger body is answered 413 and never reaches the package.
const MaxWebhookBody = 1 << 20

// maxWebhookHeaderBytes bounds a request's headers.
const maxWebhookHeaderBytes = 64 << 10

// WebhookConcurrency bounds the requests the listener handles at once; one
// beyond it is answered 503 with Retry-After at once, never queued.
var WebhookConcurrency = 64

// WebhookTimeout bounds one request from its arrival to its answer: the
// package's webhook.handle and the durable acceptance of what it yields.
// A request over it is answered 504 and, if its Events were not yet
// handed to the store, accepts nothing.
var WebhookTimeout = 30 * time.Second

// webhookListener serves the packages' webhook paths on loopback HTTP.
// A request under a path a package registered in its last configure goes
// to that package's webhook.handle; the sender gets 2xx only once every
// Event the package yields is durably accepted.
type webhookListener struct {
	d        *Daemon
	listener net.Listener
	server   *http.Server
	slots    chan struct{}
	accept   *groupAcceptor
	served   chan struct{} // closed when Serve has returned
}

// listenWebhooks opens the listener on addr (DefaultWebhookListen when
// empty); the configuration check has already held it to loopback.
func (d *Daemon) listenWebhooks(addr string) error {
	if addr == "" {
		addr = DefaultWebhookListen
	}
	if err := checkLoopback(addr); err != nil {
		return fmt.Errorf("daemon: webhook listener: %w", err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("daemon: opening the webhook listener: %w", err)
	}
	w := &webhookListener{d: d, listener: l, slots: make(chan struct{}, max(WebhookConcurrency, 1)),
		accept: newGroupAcceptor(d.store, d.engine), served: make(chan struct{})}
	w.server = &http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: WebhookTimeout,
		MaxHeaderBytes: maxWebhookHeaderBytes}
	go func() {
		defer close(w.served)
		if err := w.server.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("webhook listener", "err", err)
		}
	}()
	d.webhooks = w
	d.log.Info("webhook listener", "addr", l.Addr().String())
	return nil
}

// addr is where the listener listens.
func (w *webhookListener) addr() string { return w.listener.Addr().String() }

// close stops taking requests, lets those in flight finish within ctx,
// then stops the acceptor.
func (w *webhookListener) close(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := w.server.Shutdown(sctx); err != nil {
		w.server.Close()
	}
	cancel()
	<-w.served
	w.accept.close()
}

// route finds the package whose registered webhook path covers p (the
// longest such path: a path covers the paths beneath it).
func (w *webhookListener) route(p string) (*pkgRun, string) {
	var best *pkgRun
	bestPath := ""
	for _, pr := range w.d.packages() {
		if wp := pr.svc.CoveringWebhookPath(p); len(wp) > len(bestPath) {
			best, bestPath = pr, wp
		}
	}
	return best, bestPath
}

// webhookAnswer is the JSON body of every answer.
type webhookAnswer struct {
	Accepted int            `json:"accepted"`
	Events   []string       `json:"events,omitempty"`
	Error    *webhookRefuse `json:"error,omitempty"`
}

type webhookRefuse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// The answer's header values, shared by every answer: net/http only reads
// them (it copies the map as the header is written), and assigning the
// canonical keys directly costs no allocation per answer as Set does.
var (
	answerContentType  = []string{"application/json"}
	answerCacheControl = []string{"no-store"}
	answerRetryAfter   = []string{"1"}
)

func (w *webhookListener) answer(rw http.ResponseWriter, status int, a webhookAnswer) {
	h := rw.Header()
	h["Content-Type"] = answerContentType
	h["Cache-Control"] = answerCacheControl
	if status == http.StatusServiceUnavailable {
		h["Retry-After"] = answerRetryAfter
	}
	rw.WriteHeader(status)
	_, _ = rw.Write(a.appendJSON(make([]byte, 0, 32+72*len(a.Events))))
}

// appendJSON appends what json.NewEncoder(w).Encode(a) writes: by hand
// for an acceptance whose Event IDs need no escape (every one the store
// makes), by encoding/json otherwise.
func (a webhookAnswer) appendJSON(buf []byte) []byte {
	plain := a.Error == nil
	for _, id := range a.Events {
		plain = plain && plainJSONString(id)
	}
	if !plain {
		b := bytes.NewBuffer(buf)
		_ = json.NewEncoder(b).Encode(a) // it cannot fail
		return b.Bytes()
	}
	buf = append(buf, `{"accepted":`...)
	buf = strconv.AppendInt(buf, int64(a.Accepted), 10)
	if len(a.Events) > 0 {
		buf = append(buf, `,"events":[`...)
		for i, id := range a.Events {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, '"')
			buf = append(buf, id...)
			buf = append(buf, '"')
		}
		buf = append(buf, ']')
	}
	return append(buf, "}\n"...)
}

// plainJSONString reports whether encoding/json writes s as it is between
// quotes: printable ASCII without '"', '\\' or the characters it escapes
// for HTML.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

func (w *webhookListener) refuse(rw http.ResponseWriter, status int, code, format string, args ...any) {
	w.answer(rw, status, webhookAnswer{Error: &webhookRefuse{Code: code, Message: clip(oneLine(fmt.Sprintf(format, args...)), maxRefusalBytes)}})
}

func (w *webhookListener) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	received := time.Now().UTC()
	p := r.URL.Path
	if p == "" || p != path.Clean(p) || strings.Contains(p, "/../") || !strings.HasPrefix(p, "/") {
		w.refuse(rw, http.StatusNotFound, "not_found", "no webhook path covers this request")
		return
	}
	pr, wp := w.route(p)
	if pr == nil {
		w.refuse(rw, http.StatusNotFound, "not_found", "no webhook path covers this request")
		return
	}
	select {
	case w.slots <- struct{}{}:
		defer func() { <-w.slots }()
	default:
		w.refuse(rw, http.StatusServiceUnavailable, "overloaded", "the webhook listener is handling %d requests: retry", cap(w.slots))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), WebhookTimeout)
	defer cancel()
	// Counted from here to its enqueue, so a commit can wait for it.
	arrival := w.accept.arriving()
	defer arrival.gone()
	body, err := readWebhookBody(rw, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			w.refuse(rw, http.StatusRequestEntityTooLarge, "too_large", "the body is over %d bytes", MaxWebhookBody)
			return
		}
		w.refuse(rw, http.StatusBadRequest, "invalid", "reading the body: %v", err)
		return
	}
	_, remote, _ := pr.parts()
	envs, err := remote.Webhook(ctx, protocol.WebhookHandleParams{Method: r.Method, Path: p, WebhookPath: wp,
		Query: r.URL.RawQuery, Headers: r.Header, Body: body, ReceivedAt: received})
	if err != nil {
		w.handleFailed(rw, pr.pkg.Name, ctx, err)
		return
	}
	events, err := arrival.accept(ctx, envs)
	if err != nil {
		status, code, msg := acceptRefusal(err)
		if status != http.StatusConflict && status != http.StatusGatewayTimeout {
			// The registered path, not the request's: what follows it may
			// carry a secret (schedule's trigger token is a path segment).
			w.d.log.Error("webhook: the Events were not accepted", "package", pr.pkg.Name, "path", wp, "err", err)
		}
		w.refuse(rw, status, code, "%s", msg)
		return
	}
	a := webhookAnswer{Accepted: len(events), Events: make([]string, len(events))}
	for i, ev := range events {
		a.Events[i] = ev.ID
	}
	killPoint(KillIngressAckBefore)
	w.answer(rw, http.StatusOK, a)
	killPointFlushed(rw, KillIngressAckAfter)
}

// readWebhookBody reads r's body, at most MaxWebhookBody bytes (over it, a
// *http.MaxBytesError). A body whose declared length is within the bound,
// the usual delivery, is read straight into a buffer of that length; any
// other (chunked, or declared over the bound) goes through
// http.MaxBytesReader, which also has the server close the connection
// after answering one over the bound.
func readWebhookBody(rw http.ResponseWriter, r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= MaxWebhookBody {
		// net/http's body ends at the declared length and reports a
		// shorter one as io.ErrUnexpectedEOF.
		body := make([]byte, n)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(http.MaxBytesReader(rw, r.Body, MaxWebhookBody))
}

// refusalStatus maps the codes a package refuses a request with to the
// sender's 4xx; any other code is a failure (5xx).
var refusalStatus = map[protocol.Code]int{
	protocol.CodeInvalid:       http.StatusBadRequest,
	protocol.CodeInvalidParams: http.StatusBadRequest,
	protocol.CodeUnauthorized:  http.StatusUnauthorized,
	protocol.CodeNotFound:      http.StatusNotFound,
	protocol.CodeConflict:      http.StatusConflict,
	protocol.CodeCausalLimit:   http.StatusTooManyRequests,
}

// handleFailed answers a webhook.handle that did not yield Events.
func (w *webhookListener) handleFailed(rw http.ResponseWriter, pkg string, ctx context.Context, err error) {
	status, code, msg := handleRefusal(ctx.Err(), err, pkg)
	if status >= 500 {
		w.d.log.Warn("webhook: the package did not handle the request", "package", pkg, "status", status, "err", err)
	}
	w.refuse(rw, status, code, "%s", msg)
}

// handleRefusal is the answer to a webhook.handle that failed with err
// (ctxErr is the request's context's error): the package's refusal is 4xx
// with its reason; a bad answer, a crash, a lost connection or a timeout
// is 5xx (the sender retries; nothing was accepted).
func handleRefusal(ctxErr, err error, pkg string) (status int, code, message string) {
	var pe *protocol.Error
	switch {
	case errors.Is(err, host.ErrWebhookAnswer):
		return http.StatusBadGateway, "bad_answer", "the package's answer was refused; nothing was accepted"
	case ctxErr != nil:
		return http.StatusGatewayTimeout, "timeout", fmt.Sprintf("the package did not answer within %v: retry", WebhookTimeout)
	case errors.As(err, &pe) && refusalStatus[pe.Code] != 0:
		return refusalStatus[pe.Code], string(pe.Code), pe.Message
	case errors.As(err, &pe) && (pe.Code == protocol.CodeOverloaded || pe.Code == protocol.CodeShuttingDown):
		return http.StatusServiceUnavailable, string(pe.Code), fmt.Sprintf("the package is %s: retry", strings.ReplaceAll(string(pe.Code), "_", " "))
	}
	return http.StatusBadGateway, "package_failed", fmt.Sprintf("the package %s failed to handle the request; nothing was accepted: retry", pkg)
}

// acceptRefusal is the answer to a delivery whose Events the store did
// not accept (none of them was).
func acceptRefusal(err error) (status int, code, message string) {
	switch {
	case errors.Is(err, runtime.ErrConflict):
		// Deterministic: the same identity with other content never will be.
		return http.StatusConflict, "conflict", "an Event of this delivery was accepted before with other content"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return http.StatusGatewayTimeout, "timeout", fmt.Sprintf("not accepted within %v: retry", WebhookTimeout)
	case errors.Is(err, runtime.ErrInvalid), errors.Is(err, runtime.ErrUnauthorized), errors.Is(err, runtime.ErrCausalLimit):
		return http.StatusBadGateway, "bad_answer", "the package's Events were refused; nothing was accepted"
	}
	return http.StatusInternalServerError, "store_failed", "the Events could not be stored; nothing was accepted: retry"
}
