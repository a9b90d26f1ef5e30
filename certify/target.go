package certify

import (
	"context"
	"encoding/json"
	"io"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/protocol"
)

// Package is one extension package under certification, as the host wiring
// presents it: a supervised process speaking the protocol over stdio
// against the run's temporary state directory. The runner starts it lazily,
// the first time a criterion asks for it, and keeps one Package for the
// whole run, restarting its process after a crash or a hang. Methods are
// safe for concurrent use: a criterion abandoned after its deadline may
// still hold the Package while the next one runs.
type Package interface {
	// Start starts the process and completes initialize and configure.
	Start(ctx context.Context) error
	// Restart stops the process if it still runs (killing it if it must),
	// then starts it again with initialize and configure.
	Restart(ctx context.Context) error
	// Stop shuts the process down in order: shutdown, then closing stdin,
	// then signals. It returns once the process is gone.
	Stop(ctx context.Context) error
	// Call sends one host-to-extension request and decodes its result.
	Call(ctx context.Context, method string, params, result any) error
	// Exited reports whether the process has ended since it was last
	// started, and why: cause is nil when the host ended it on purpose
	// (Stop, or a suite that closed its stdin or killed it), and otherwise
	// the process's failure (exit status, signal, broken pipe). The runner
	// fails a criterion during which the package ended with a cause.
	Exited() (exited bool, cause error)
	// ProtocolVersion is the version negotiated at the last initialize; 0
	// before one succeeded.
	ProtocolVersion() protocol.Version
	// Trace is every wire message recorded since the Package was
	// launched, across restarts, oldest first.
	Trace() []WireMessage
	// StderrTail is the end of the process's stderr log.
	StderrTail() string
}

// LaunchSpec is what a LaunchFunc gets.
type LaunchSpec struct {
	// Dir is the package directory.
	Dir string
	// Manifest is the package's parsed, valid manifest.
	Manifest *protocol.Manifest
	// StateDir is the run's fresh temporary state directory.
	StateDir string
	// Inputs are the author's inputs (conformance.InputsFile); nil for
	// inputs built from the schemas.
	Inputs *conformance.Inputs
	// Trace, when not nil, receives each wire line as it is recorded, in
	// the --trace format (WriteTrace): the LaunchFunc streams every line
	// its Package records to it, so a run killed midway keeps them.
	Trace io.Writer
}

// LaunchFunc makes the Package for a run without starting it. The host
// wiring provides it; an error wrapping ErrHarness is the runner's own.
type LaunchFunc func(ctx context.Context, spec LaunchSpec) (Package, error)

// The directions of a wire message.
const (
	DirectionToExtension   = "host_to_extension"
	DirectionFromExtension = "extension_to_host"
)

// WireMessage is one line of the wire transcript.
type WireMessage struct {
	// Time is when the line was written or read.
	Time time.Time `json:"time"`
	// Direction is DirectionToExtension or DirectionFromExtension.
	Direction string `json:"direction"`
	// Message is the JSON-RPC message, when the line was JSON.
	Message json.RawMessage `json:"message,omitempty"`
	// Text is the line as read, when it was not JSON (stray stdout).
	Text string `json:"text,omitempty"`
}

// normalizeWire returns trace with every message that is not valid JSON
// moved to Text, so reports built from it always encode.
func normalizeWire(trace []WireMessage) []WireMessage {
	out := make([]WireMessage, len(trace))
	for i, m := range trace {
		if m.Message != nil && !json.Valid(m.Message) {
			m.Text, m.Message = string(m.Message), nil
		}
		out[i] = m
	}
	return out
}

// MaxStrayBytes is how much of a stray stdout line a report quotes.
const MaxStrayBytes = 200

// StrayStdout returns the first line the package wrote to stdout that was
// not a JSON message, cut to MaxStrayBytes on a UTF-8 boundary.
func StrayStdout(trace []WireMessage) (line string, ok bool) {
	for _, m := range trace {
		if m.Direction == DirectionFromExtension && m.Message == nil {
			return clipBytes(m.Text, MaxStrayBytes), true
		}
	}
	return "", false
}

// clipBytes cuts s to at most n bytes without splitting a UTF-8 sequence.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// tailBytes keeps the last n bytes of s, starting on a UTF-8 boundary.
func tailBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// Evidence is what a failed criterion leaves behind.
type Evidence struct {
	// Wire is the wire around the failing moment: when the failure names
	// a message (a stray stdout line, a write made again), the messages
	// around it (EvidenceAround on each side); otherwise the last ones
	// recorded while the criterion ran (at most EvidenceMessages).
	Wire []WireMessage `json:"wire,omitempty"`
	// At is the position, from 1, in the run's wire transcript (--trace)
	// of the message the failure names, and From that of Wire[0]; both
	// are 0 when the failure names none.
	At   int `json:"at,omitempty"`
	From int `json:"from,omitempty"`
	// Stderr is the tail of the package's stderr (at most EvidenceStderrBytes).
	Stderr string `json:"stderr,omitempty"`
}

// How much evidence a failure keeps.
const (
	EvidenceMessages    = 10
	EvidenceAround      = 5
	EvidenceStderrBytes = 4096
)

// Target is what a criterion runs against: the package directory, its
// manifest and, on demand, the running Package.
type Target struct {
	// Dir is the package directory.
	Dir string
	// Manifest is the parsed manifest; nil when it did not load, in which
	// case only manifest/valid runs.
	Manifest *protocol.Manifest
	// StateDir is the run's temporary state directory ("" when it could
	// not be made).
	StateDir string

	session   *session
	abandoned atomic.Bool
}

// Package returns the running package, starting it on first use and
// restarting it when it exited or a previous criterion left it hung. An
// error wrapping ErrHarness means the runner could not provide one; any
// other error is the package's failure to start.
func (t *Target) Package(ctx context.Context) (Package, error) {
	if t.abandoned.Load() {
		return nil, Harnessf("the criterion was abandoned after its deadline")
	}
	if t.session == nil {
		return nil, Harnessf("no package session")
	}
	return t.session.get(ctx, t)
}
