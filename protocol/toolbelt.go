package protocol

import "encoding/json"

// The toolbelt endpoint is how a run calls the operations its binding
// grants. executor.run (and executor.recover) carry the attempt's endpoint
// and token; an executor hands them to what it runs, for a process in
// ToolbeltEndpointEnv and ToolbeltTokenEnv. The host serves the endpoint
// as HTTP on a unix socket: the endpoint is ToolbeltUnixScheme followed by
// the socket's path. A call is one POST of a ToolbeltCallRequest to
// ToolbeltCallPath with the header "Authorization: Bearer <token>"; the
// answer is a ToolbeltCallResponse, with a 2xx status for an output and
// another for an error. The token names one attempt at its lease epoch:
// the host refuses it (unauthorized) once the attempt has ended or its
// run is adopted under a new epoch, and a call of an operation the
// binding does not grant is refused as unauthorized too.
const (
	// ToolbeltUnixScheme prefixes an endpoint that is a unix socket.
	ToolbeltUnixScheme = "unix:"
	// ToolbeltCallPath is the path a call is posted to.
	ToolbeltCallPath = "/v1/toolbelt/call"
	// ToolbeltEndpointEnv and ToolbeltTokenEnv name the variables an
	// executor sets for the process of a run (OS_* variables are the
	// toolbelt's: no pass_env grants them).
	ToolbeltEndpointEnv = "OS_TOOLBELT_ENDPOINT"
	ToolbeltTokenEnv    = "OS_TOOLBELT_TOKEN"
	// MaxToolbeltCallBytes caps a call's request body.
	MaxToolbeltCallBytes = 1 << 20
)

// ToolbeltCallRequest is one toolbelt call of a run.
type ToolbeltCallRequest struct {
	// Operation is the operation called; the binding must grant it.
	Operation string `json:"operation"`
	// RequestID names the call across retries: a retry with the same id
	// replays the committed answer. Empty means no replay.
	RequestID string `json:"request_id,omitempty"`
	// Input is the call's input.
	Input json.RawMessage `json:"input,omitempty"`
}

// ToolbeltCallResponse is a toolbelt call's answer: the operation's
// output, or an error.
type ToolbeltCallResponse struct {
	// Output is the operation's output.
	Output json.RawMessage `json:"output,omitempty"`
	// Error is the refusal: an operation's own error with its code and
	// message verbatim, or the host's (unauthorized, invalid, not_found,
	// internal …).
	Error *ToolbeltError `json:"error,omitempty"`
}

// ToolbeltError is a refused toolbelt call.
type ToolbeltError struct {
	// Code is a stable [a-z][a-z0-9_]* code.
	Code string `json:"code"`
	// Message says why, without echoing the call's input.
	Message string `json:"message"`
}
