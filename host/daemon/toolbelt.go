package daemon

// The toolbelt endpoint: the daemon's server of the toolbelt calls runs
// make (protocol.ToolbeltCallPath), and the issuer of each attempt's
// endpoint and token (runtime.ToolbeltIssuer).
//
// It is HTTP on one unix socket, <state>/toolbelt.sock, mode 0600, not
// loopback TCP: a loopback port is open to every local user and to any
// web page a browser on the machine loads (DNS rebinding), while the
// socket's file mode admits only the operator's own user, which is who
// runs the executors; and it needs no port. One socket serves every run,
// rather than a socket in each run's directory: the host does not own the
// layout of an executor's run directories, and a deep run directory would
// overflow a unix socket's 107-byte path. The per-run token is what tells
// runs apart.
//
// A token names one attempt at its lease epoch and is signed with a key
// the daemon draws at start and never stores: "otb1.<execution
// id>.<epoch>.<HMAC-SHA256>". A forged or altered token fails the MAC; a
// token of an attempt that ended, or of an epoch another observer
// superseded (a run adopted after a restart gets a new token), fails
// runtime.Engine.AuthorityAt; a token from before a daemon restart fails
// the MAC under the new key. All are refused as unauthorized, and so is a
// call of an operation the binding does not grant.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// ToolbeltSocketPath is the toolbelt endpoint's socket in a state
// directory.
func ToolbeltSocketPath(state string) string { return filepath.Join(state, "toolbelt.sock") }

// toolbeltTokenPrefix versions the token format.
const toolbeltTokenPrefix = "otb1"

// maxToolbeltCalls bounds the calls served at once; one more is answered
// 503 (overloaded) rather than queued.
const maxToolbeltCalls = 64

// toolbeltCallTimeout bounds one call, handler and commit included.
var toolbeltCallTimeout = 2 * time.Minute

// toolbelt is the daemon's toolbelt endpoint.
type toolbelt struct {
	key      []byte
	endpoint string // "" when the socket cannot be served
	reason   string // why not, for the refusal of an Issue
	engine   func() *runtime.Engine
	log      *slog.Logger
	slots    chan struct{}

	listener net.Listener
	server   *http.Server
	serving  chan struct{}
}

var _ runtime.ToolbeltIssuer = (*toolbelt)(nil)

// newToolbelt draws the token key. The endpoint is served once listen has
// succeeded.
func newToolbelt(state string, engine func() *runtime.Engine, log *slog.Logger) (*toolbelt, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	tb := &toolbelt{key: key, engine: engine, log: log, slots: make(chan struct{}, maxToolbeltCalls), serving: make(chan struct{})}
	if path := ToolbeltSocketPath(state); len(path) >= maxSocketPath {
		tb.reason = fmt.Sprintf("the toolbelt socket path %s is %d bytes, over the %d a unix socket allows: use a shorter state directory", path, len(path), maxSocketPath-1)
	}
	return tb, nil
}

// listen serves the endpoint on its socket, mode 0600.
func (tb *toolbelt) listen(state string) error {
	if tb.reason != "" {
		close(tb.serving)
		return errors.New(tb.reason)
	}
	path := ToolbeltSocketPath(state)
	_ = os.Remove(path) // the state lock is held: a socket left here is a dead daemon's
	l, err := net.Listen("unix", path)
	if err != nil {
		close(tb.serving)
		tb.reason = "the toolbelt socket could not be opened"
		return fmt.Errorf("daemon: opening the toolbelt socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		close(tb.serving)
		tb.reason = "the toolbelt socket could not be restricted to its owner"
		return fmt.Errorf("daemon: toolbelt socket: %w", err)
	}
	tb.listener = l
	tb.endpoint = protocol.ToolbeltUnixScheme + path
	mux := http.NewServeMux()
	mux.HandleFunc(protocol.ToolbeltCallPath, tb.serveCall)
	// A call's body is small: reading it is bounded apart from the call,
	// so a run that stops sending holds no slot for long.
	tb.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	go func() {
		defer close(tb.serving)
		if err := tb.server.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			tb.log.Error("toolbelt endpoint", "err", err)
		}
	}()
	return nil
}

// close stops taking calls; those in flight finish within ctx.
func (tb *toolbelt) close(ctx context.Context, state string) {
	if tb.server == nil {
		return
	}
	if err := tb.server.Shutdown(ctx); err != nil {
		tb.server.Close()
	}
	<-tb.serving
	_ = os.Remove(ToolbeltSocketPath(state))
}

// Issue implements runtime.ToolbeltIssuer.
func (tb *toolbelt) Issue(executionID string, epoch int64) (runtime.RunToolbelt, error) {
	if tb.endpoint == "" {
		return runtime.RunToolbelt{}, fmt.Errorf("%w: the daemon serves no toolbelt: %s", runtime.ErrUnsupported, tb.reason)
	}
	return runtime.RunToolbelt{Endpoint: tb.endpoint, Token: tb.token(executionID, epoch)}, nil
}

func (tb *toolbelt) mac(executionID string, epoch int64) []byte {
	m := hmac.New(sha256.New, tb.key)
	m.Write([]byte(toolbeltTokenPrefix + "\x00" + executionID + "\x00" + strconv.FormatInt(epoch, 10)))
	return m.Sum(nil)
}

func (tb *toolbelt) token(executionID string, epoch int64) string {
	return strings.Join([]string{toolbeltTokenPrefix, executionID, strconv.FormatInt(epoch, 10),
		base64.RawURLEncoding.EncodeToString(tb.mac(executionID, epoch))}, ".")
}

// errBadToken is every token the daemon did not issue, whatever is wrong
// with it: the refusal says no more, so a forger learns nothing.
var errBadToken = fmt.Errorf("%w: the toolbelt token is not valid", runtime.ErrUnauthorized)

// parseToken checks a token's form and MAC and returns the attempt it
// names. Execution ids are identifiers (no '.'), so the form is exact.
func (tb *toolbelt) parseToken(token string) (executionID string, epoch int64, err error) {
	parts := strings.Split(token, ".")
	if len(parts) != 4 || parts[0] != toolbeltTokenPrefix || runtime.ValidateIdentifier("execution id", parts[1]) != nil {
		return "", 0, errBadToken
	}
	epoch, err = strconv.ParseInt(parts[2], 10, 64)
	if err != nil || epoch <= 0 || strconv.FormatInt(epoch, 10) != parts[2] {
		return "", 0, errBadToken
	}
	sum, err := base64.RawURLEncoding.DecodeString(parts[3])
	if err != nil || !hmac.Equal(sum, tb.mac(parts[1], epoch)) {
		return "", 0, errBadToken
	}
	return parts[1], epoch, nil
}

// serveCall serves one toolbelt call.
func (tb *toolbelt) serveCall(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeToolbelt(w, http.StatusMethodNotAllowed, nil, &protocol.ToolbeltError{Code: string(protocol.CodeInvalid), Message: "a toolbelt call is a POST"})
		return
	}
	select {
	case tb.slots <- struct{}{}:
		defer func() { <-tb.slots }()
	default:
		writeToolbelt(w, http.StatusServiceUnavailable, nil, &protocol.ToolbeltError{Code: string(protocol.CodeOverloaded),
			Message: fmt.Sprintf("%d toolbelt calls are under way: retry", maxToolbeltCalls)})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), toolbeltCallTimeout)
	defer cancel()
	out, err := tb.call(ctx, r)
	if err != nil {
		status, te := toolbeltRefusal(err)
		if status == http.StatusInternalServerError {
			tb.log.Warn("toolbelt call", "err", err) // the detail stays in the log
		}
		writeToolbelt(w, status, nil, te)
		return
	}
	writeToolbelt(w, http.StatusOK, out, nil)
}

// call authenticates the run, checks the grant and runs the operation.
func (tb *toolbelt) call(ctx context.Context, r *http.Request) (json.RawMessage, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, fmt.Errorf("%w: the call carries no bearer token", runtime.ErrUnauthorized)
	}
	executionID, epoch, err := tb.parseToken(token)
	if err != nil {
		return nil, err
	}
	req, err := decodeToolbeltCall(r.Body)
	if err != nil {
		return nil, err
	}
	engine := tb.engine()
	auth, err := engine.AuthorityAt(ctx, executionID, epoch)
	if errors.Is(err, runtime.ErrNotFound) {
		return nil, errBadToken
	}
	if err != nil {
		return nil, err
	}
	// The grant is checked before the operation is looked up, so a run
	// learns nothing of operations it was not given.
	if !slices.Contains(auth.Operations, req.Operation) {
		return nil, fmt.Errorf("%w: operation %q is not granted to this run's binding", runtime.ErrUnauthorized, req.Operation)
	}
	return engine.Call(ctx, auth, req.Operation, req.RequestID, req.Input)
}

// decodeToolbeltCall reads a call strictly: at most
// MaxToolbeltCallBytes of valid UTF-8 JSON, one object with no unknown or
// repeated member and nothing after it, an operation's name and an input
// that is JSON.
func decodeToolbeltCall(body io.Reader) (protocol.ToolbeltCallRequest, error) {
	var req protocol.ToolbeltCallRequest
	data, err := io.ReadAll(io.LimitReader(body, protocol.MaxToolbeltCallBytes+1))
	if err != nil {
		return req, fmt.Errorf("%w: reading the call: %v", runtime.ErrInvalid, err)
	}
	if len(data) > protocol.MaxToolbeltCallBytes {
		return req, fmt.Errorf("%w: the call is over %d bytes", runtime.ErrInvalid, protocol.MaxToolbeltCallBytes)
	}
	if !utf8.Valid(data) {
		return req, fmt.Errorf("%w: the call is not valid UTF-8", runtime.ErrInvalid)
	}
	if err := checkMembers(data); err != nil {
		return req, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%w: the call is not a toolbelt call: %v", runtime.ErrInvalid, err)
	}
	if dec.More() {
		return req, fmt.Errorf("%w: the call has more than one JSON value", runtime.ErrInvalid)
	}
	if !validOperationName(req.Operation) {
		return req, fmt.Errorf("%w: the call names no operation (dot-separated identifiers)", runtime.ErrInvalid)
	}
	return req, nil
}

// validOperationName: an operation's name is identifiers joined by dots
// (notes.add), as a manifest declares it.
func validOperationName(name string) bool {
	if name == "" || len(name) > runtime.MaxIdentifierBytes {
		return false
	}
	for part := range strings.SplitSeq(name, ".") {
		if !protocol.IsIdentifier(part) {
			return false
		}
	}
	return true
}

// checkMembers refuses a call object that repeats a member (encoding/json
// would keep the last, so two readers could see two calls).
func checkMembers(data []byte) error {
	var members []string
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return fmt.Errorf("%w: the call is not a JSON object", runtime.ErrInvalid)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: the call is not valid JSON", runtime.ErrInvalid)
		}
		name, _ := tok.(string)
		if slices.Contains(members, name) {
			return fmt.Errorf("%w: the call repeats the member %q", runtime.ErrInvalid, name)
		}
		members = append(members, name)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return fmt.Errorf("%w: the call is not valid JSON", runtime.ErrInvalid)
		}
	}
	return nil
}

// toolbeltRefusal is a failed call's status and wire error: an
// operation's own error verbatim, a runtime refusal as its code with its
// message, anything else internal with no detail.
func toolbeltRefusal(err error) (int, *protocol.ToolbeltError) {
	var opErr *runtime.OperationError
	if errors.As(err, &opErr) {
		return http.StatusUnprocessableEntity, &protocol.ToolbeltError{Code: opErr.Code, Message: opErr.Message}
	}
	for _, m := range []struct {
		err    error
		code   protocol.Code
		status int
	}{
		{runtime.ErrUnauthorized, protocol.CodeUnauthorized, http.StatusForbidden},
		{runtime.ErrInvalid, protocol.CodeInvalid, http.StatusBadRequest},
		{runtime.ErrTooLarge, protocol.CodeInvalid, http.StatusBadRequest},
		{runtime.ErrNotFound, protocol.CodeNotFound, http.StatusNotFound},
		{runtime.ErrConflict, protocol.CodeConflict, http.StatusConflict},
		{runtime.ErrCausalLimit, protocol.CodeCausalLimit, http.StatusTooManyRequests},
		{runtime.ErrUnsupported, protocol.CodeUnsupported, http.StatusNotImplemented},
		{context.DeadlineExceeded, protocol.CodeCancelled, http.StatusGatewayTimeout},
		{context.Canceled, protocol.CodeCancelled, http.StatusGatewayTimeout},
	} {
		if errors.Is(err, m.err) {
			return m.status, &protocol.ToolbeltError{Code: string(m.code), Message: err.Error()}
		}
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return http.StatusBadGateway, &protocol.ToolbeltError{Code: string(pe.Code), Message: pe.Message}
	}
	return http.StatusInternalServerError, &protocol.ToolbeltError{Code: string(protocol.CodeInternal), Message: "internal error"}
}

func writeToolbelt(w http.ResponseWriter, status int, out json.RawMessage, te *protocol.ToolbeltError) {
	b, err := json.Marshal(protocol.ToolbeltCallResponse{Output: out, Error: te})
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
