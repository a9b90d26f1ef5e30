package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// Toolbelt is a run's client of the toolbelt endpoint: what an executor
// hands a run so it can call the operations its binding grants. The
// endpoint and token come in executor.run (and, renewed for a new epoch,
// executor.recover); a process gets them through ToolbeltEnv and rebuilds
// the client with ToolbeltFromEnv.
type Toolbelt struct {
	Endpoint string
	Token    string
}

// ToolbeltOf is the toolbelt an executor.run gives its run; zero when the
// binding grants none.
func ToolbeltOf(p protocol.ExecutorRunParams) Toolbelt {
	return Toolbelt{Endpoint: p.Endpoint, Token: p.Token}
}

// Granted reports whether the run has a toolbelt at all.
func (tb Toolbelt) Granted() bool { return tb.Endpoint != "" && tb.Token != "" }

// Env is the environment a run's process reaches the toolbelt with
// (protocol.ToolbeltEndpointEnv, protocol.ToolbeltTokenEnv); empty when
// the run has no toolbelt.
func (tb Toolbelt) Env() map[string]string {
	if !tb.Granted() {
		return nil
	}
	return map[string]string{protocol.ToolbeltEndpointEnv: tb.Endpoint, protocol.ToolbeltTokenEnv: tb.Token}
}

// ToolbeltFromEnv is the toolbelt of the process's run, from the variables
// Env sets; ErrUnsupported-coded when they are not set.
func ToolbeltFromEnv() (Toolbelt, error) {
	tb := Toolbelt{Endpoint: os.Getenv(protocol.ToolbeltEndpointEnv), Token: os.Getenv(protocol.ToolbeltTokenEnv)}
	if !tb.Granted() {
		return Toolbelt{}, protocol.Errorf(protocol.CodeUnsupported, "this process has no toolbelt: %s and %s are not set",
			protocol.ToolbeltEndpointEnv, protocol.ToolbeltTokenEnv)
	}
	return tb, nil
}

// maxToolbeltAnswer caps an answer read from the endpoint.
const maxToolbeltAnswer = protocol.MaxMessageBytes

// toolbeltTimeout bounds one call when ctx sets no deadline.
const toolbeltTimeout = 2 * time.Minute

// Call calls operation with input (marshalled to JSON; nil for none). A
// retry with the same requestID replays the committed answer. A refusal
// (an ungranted operation, a stale token, the operation's own error) is a
// *protocol.Error with its code and message.
func (tb Toolbelt) Call(ctx context.Context, operation, requestID string, input any) (json.RawMessage, error) {
	if !tb.Granted() {
		return nil, protocol.Errorf(protocol.CodeUnsupported, "the run has no toolbelt")
	}
	path, ok := strings.CutPrefix(tb.Endpoint, protocol.ToolbeltUnixScheme)
	if !ok || path == "" {
		return nil, protocol.Errorf(protocol.CodeInvalid, "toolbelt endpoint %q is not %s<socket path>", tb.Endpoint, protocol.ToolbeltUnixScheme)
	}
	req := protocol.ToolbeltCallRequest{Operation: operation, RequestID: requestID}
	if input != nil {
		raw, err := json.Marshal(input)
		if err != nil {
			return nil, fmt.Errorf("toolbelt call %s: input: %w", operation, err)
		}
		req.Input = raw
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, toolbeltTimeout)
		defer cancel()
	}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}}
	defer hc.CloseIdleConnections()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://toolbelt"+protocol.ToolbeltCallPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+tb.Token)
	resp, err := hc.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("toolbelt call %s: %w", operation, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxToolbeltAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("toolbelt call %s: reading the answer: %w", operation, err)
	}
	if len(data) > maxToolbeltAnswer {
		return nil, fmt.Errorf("toolbelt call %s: the answer is over %d bytes", operation, maxToolbeltAnswer)
	}
	var answer protocol.ToolbeltCallResponse
	if err := json.Unmarshal(data, &answer); err != nil {
		return nil, fmt.Errorf("toolbelt call %s: answer (HTTP %d) is not a toolbelt answer: %w", operation, resp.StatusCode, err)
	}
	if answer.Error != nil {
		return nil, protocol.NewError(protocol.Code(answer.Error.Code), answer.Error.Message)
	}
	if resp.StatusCode/100 != 2 {
		return nil, errors.New("toolbelt call " + operation + ": HTTP " + resp.Status + " without an error")
	}
	return answer.Output, nil
}
