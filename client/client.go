// Package client is the public Go client of the open-conduit daemon's
// management API: HTTP/1.1 + JSON on the daemon's unix socket
// (<state dir>/api.sock), under /v1/. Its wire types are in wire.go; every
// refusal is an *Error whose code matches one sentinel (errors.Is(err,
// client.ErrNotFound)).
//
// The CLI's operator commands, extensiontest and the scenarios drive the
// daemon through this package only.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// SocketName is the API socket's name in the daemon's state directory.
const SocketName = "api.sock"

// maxResponse bounds a response body the client reads.
const maxResponse = 64 << 20

// Client talks to one daemon. It is safe for concurrent use.
type Client struct {
	socket string
	http   *http.Client
}

// New returns a client of the daemon whose API socket is socketPath. It
// does not connect until a call.
func New(socketPath string) *Client {
	dialer := &net.Dialer{}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socketPath)
		},
		DisableCompression: true,
	}
	return &Client{socket: socketPath, http: &http.Client{Transport: transport}}
}

// Socket is the socket path the client dials.
func (c *Client) Socket() string { return c.socket }

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Status reads the daemon's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var out Status
	return out, c.do(ctx, "GET", "/v1/status", nil, nil, &out)
}

// Ready reports readiness: ErrUnavailable until the daemon is ready.
func (c *Client) Ready(ctx context.Context) (Readiness, error) {
	var out Readiness
	return out, c.do(ctx, "GET", "/v1/ready", nil, nil, &out)
}

// Scopes lists the configured scopes.
func (c *Client) Scopes(ctx context.Context) ([]Scope, error) {
	var out ScopeList
	return out.Scopes, c.do(ctx, "GET", "/v1/scopes", nil, nil, &out)
}

// Samples lists the sample Events a scope's routes offer for traces.
func (c *Client) Samples(ctx context.Context, scope string) ([]Sample, error) {
	var out SampleList
	return out.Samples, c.do(ctx, "GET", "/v1/scopes/"+url.PathEscape(scope)+"/samples", nil, nil, &out)
}

// Trace asks every route of scope how it would decide an Event (or a
// named sample). It writes nothing.
func (c *Client) Trace(ctx context.Context, scope string, req TraceRequest) (TraceResult, error) {
	var out TraceResult
	return out, c.do(ctx, "POST", "/v1/scopes/"+url.PathEscape(scope)+"/route/trace", nil, jsonBody(req), &out)
}

// Events reads a page of Events.
func (c *Client) Events(ctx context.Context, q EventQuery) (EventPage, error) {
	v := url.Values{}
	if q.Scope != "" {
		v.Set("scope", q.Scope)
	}
	setInt(v, "after", q.After)
	setInt(v, "limit", int64(q.Limit))
	var out EventPage
	return out, c.do(ctx, "GET", "/v1/events", v, nil, &out)
}

// Event reads one Event and its route record.
func (c *Client) Event(ctx context.Context, id string) (EventDetail, error) {
	var out EventDetail
	return out, c.do(ctx, "GET", "/v1/events/"+url.PathEscape(id), nil, nil, &out)
}

// Works reads a page of Work.
func (c *Client) Works(ctx context.Context, q WorkQuery) (WorkPage, error) {
	v := url.Values{}
	setString(v, "scope", q.Scope)
	setString(v, "state", q.State)
	setString(v, "after", q.After)
	setInt(v, "limit", int64(q.Limit))
	var out WorkPage
	return out, c.do(ctx, "GET", "/v1/work", v, nil, &out)
}

// Work reads one Work with its active Wait and Executions.
func (c *Client) Work(ctx context.Context, id string) (WorkDetail, error) {
	var out WorkDetail
	return out, c.do(ctx, "GET", "/v1/work/"+url.PathEscape(id), nil, nil, &out)
}

// Executions lists a Work's Executions by attempt.
func (c *Client) Executions(ctx context.Context, workID string) ([]Execution, error) {
	var out ExecutionList
	return out.Executions, c.do(ctx, "GET", "/v1/work/"+url.PathEscape(workID)+"/executions", nil, nil, &out)
}

// CancelWork cancels a Work that has not ended (ErrConflict if it has)
// and returns it as stored after the cancel.
func (c *Client) CancelWork(ctx context.Context, id, reason string) (Work, error) {
	var out Work
	return out, c.do(ctx, "POST", "/v1/work/"+url.PathEscape(id)+"/cancel", nil, jsonBody(CancelRequest{Reason: reason}), &out)
}

// Waits reads a page of active Waits.
func (c *Client) Waits(ctx context.Context, q WaitQuery) (WaitList, error) {
	v := url.Values{}
	setString(v, "scope", q.Scope)
	setString(v, "after", q.After)
	setInt(v, "limit", int64(q.Limit))
	var out WaitList
	return out, c.do(ctx, "GET", "/v1/waits", v, nil, &out)
}

// Config reads the running configuration, redacted, and its generation.
func (c *Client) Config(ctx context.Context) (ConfigView, error) {
	var out ConfigView
	return out, c.do(ctx, "GET", "/v1/config", nil, nil, &out)
}

// ValidateConfig checks a configuration document without applying it.
func (c *Client) ValidateConfig(ctx context.Context, doc []byte) (ConfigResult, error) {
	var out ConfigResult
	return out, c.do(ctx, "POST", "/v1/config/validate", nil, bytes.NewReader(doc), &out)
}

// ApplyConfig applies a configuration document as a new generation. A
// refused document is an *Error with CodeConfigInvalid carrying every
// diagnostic; the running generation keeps serving.
func (c *Client) ApplyConfig(ctx context.Context, doc []byte) (Generation, error) {
	var out ConfigResult
	if err := c.do(ctx, "POST", "/v1/config/apply", nil, bytes.NewReader(doc), &out); err != nil {
		return Generation{}, err
	}
	if out.Generation == nil {
		return Generation{}, Errorf(CodeInternal, "the daemon applied the configuration but named no generation")
	}
	return *out.Generation, nil
}

// Reconcile runs one reconcile scan of an ingress source now.
func (c *Client) Reconcile(ctx context.Context, source string) (ReconcileResult, error) {
	var out ReconcileResult
	return out, c.do(ctx, "POST", "/v1/sources/"+url.PathEscape(source)+"/reconcile", nil, nil, &out)
}

// Clock reads the daemon's clock.
func (c *Client) Clock(ctx context.Context) (ClockState, error) {
	var out ClockState
	return out, c.do(ctx, "GET", "/v1/clock", nil, nil, &out)
}

// AdvanceClock moves a manual clock (serve --test-clock) forward by d. The
// timers, passes and leases that fall due are woken before it returns;
// what they do happens after, so wait for it on the change stream or in
// Status. A daemon on the system clock refuses it (conflict).
func (c *Client) AdvanceClock(ctx context.Context, d time.Duration) (ClockState, error) {
	var out ClockState
	return out, c.do(ctx, "POST", "/v1/clock/advance", nil, jsonBody(ClockAdvance{By: d.String()}), &out)
}

// SetClock moves a manual clock forward to t, as AdvanceClock does.
func (c *Client) SetClock(ctx context.Context, t time.Time) (ClockState, error) {
	var out ClockState
	return out, c.do(ctx, "POST", "/v1/clock/advance", nil, jsonBody(ClockAdvance{To: t}), &out)
}

// Doctor runs the daemon's doctor: its own checks and every check its
// packages declare; deep asks for their thorough forms.
func (c *Client) Doctor(ctx context.Context, deep bool) (DoctorReport, error) {
	v := url.Values{}
	if deep {
		v.Set("deep", "true")
	}
	var out DoctorReport
	return out, c.do(ctx, "GET", "/v1/doctor", v, nil, &out)
}

// KV reads a page of one package's KV namespace (ErrNotFound for a
// package the daemon does not know, ErrInvalidRequest for a namespace that
// is not the package's).
func (c *Client) KV(ctx context.Context, q KVQuery) (KVPage, error) {
	v := url.Values{}
	v.Set("package", q.Package)
	setString(v, "namespace", q.Namespace)
	setString(v, "prefix", q.Prefix)
	setString(v, "after", q.After)
	setInt(v, "limit", int64(q.Limit))
	var out KVPage
	return out, c.do(ctx, "GET", "/v1/kv", v, nil, &out)
}

// ReloadPackages has the daemon discover its packages again and restart
// the ones added, removed or changed (changed names those to restart
// whatever their manifest says), leaving the others running.
func (c *Client) ReloadPackages(ctx context.Context, changed []string) (PackageReload, error) {
	body, err := json.Marshal(PackageReloadRequest{Changed: changed})
	if err != nil {
		return PackageReload{}, err
	}
	var out PackageReload
	return out, c.do(ctx, "POST", "/v1/packages/reload", nil, bytes.NewReader(body), &out)
}

// KVLayouts reads the KV layout version the store records for each
// package.
func (c *Client) KVLayouts(ctx context.Context) (map[string]int, error) {
	var out KVLayouts
	if err := c.do(ctx, "GET", "/v1/packages/kv-layouts", nil, nil, &out); err != nil {
		return nil, err
	}
	if out.Layouts == nil {
		out.Layouts = map[string]int{}
	}
	return out.Layouts, nil
}

func setString(v url.Values, name, s string) {
	if s != "" {
		v.Set(name, s)
	}
}

func setInt(v url.Values, name string, n int64) {
	if n != 0 {
		v.Set(name, strconv.FormatInt(n, 10))
	}
}

func jsonBody(v any) io.Reader {
	data, err := json.Marshal(v)
	if err != nil {
		// The request types marshal; a failure is a programming error.
		panic(fmt.Sprintf("client: encoding a request: %v", err))
	}
	return bytes.NewReader(data)
}

// request sends one request and returns the response of a 2xx status; a
// refusal becomes an *Error.
func (c *Client) request(ctx context.Context, method, path string, q url.Values, body io.Reader, header http.Header) (*http.Response, error) {
	// path is already escaped (url.PathEscape of each name), so a name
	// holding "/" stays one segment.
	u, err := url.Parse("http://open-conduit" + path)
	if err != nil {
		return nil, Errorf(CodeInvalidRequest, "%s %s: %v", method, path, err)
	}
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, Errorf(CodeInvalidRequest, "%s %s: %v", method, path, err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Code: CodeUnavailable,
			Message: fmt.Sprintf("no daemon answers on %s (is `open-conduit serve` running with this state directory?): %v", c.socket, unwrapNet(err))}
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, decodeError(resp)
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, out any) error {
	resp, err := c.request(ctx, method, path, q, body, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return &Error{Code: CodeUnavailable, Message: fmt.Sprintf("%s %s: reading the answer: %v", method, path, err)}
	}
	if len(data) > maxResponse {
		return Errorf(CodeInternal, "%s %s: the answer is over %d bytes", method, path, maxResponse)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return Errorf(CodeInternal, "%s %s: the daemon's answer does not decode: %v", method, path, err)
	}
	return nil
}

// decodeError reads a refusal's body; one that does not decode is named by
// its status.
func decodeError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var body errorBody
	if json.Unmarshal(data, &body) == nil && body.Error.Code.Valid() {
		return &Error{Code: body.Error.Code, Message: body.Error.Message, Diagnostics: body.Error.Diagnostics}
	}
	code := CodeForStatus(resp.StatusCode)
	return &Error{Code: code, Message: fmt.Sprintf("HTTP %s", resp.Status)}
}

// unwrapNet strips the URL the http client wraps around a dial error.
func unwrapNet(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
