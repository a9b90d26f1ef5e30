package invoke

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Limits are an invocation's hard limits. Every field must lie in its
// range (LimitRanges); DefaultLimits holds the defaults. The zero value is
// not valid: a wall time of 0 is out of range, so a Limits that was never
// filled in is refused rather than read as "no limit".
type Limits struct {
	// WallTimeMS bounds the whole exchange, from the launch to the end of
	// both output streams.
	WallTimeMS int64 `json:"wall_time_ms"`
	// MaxRequestBytes bounds each message the host sends, the call's
	// params included; a request over it is refused before launch.
	MaxRequestBytes int64 `json:"max_request_bytes"`
	// MaxStdoutBytes bounds everything the extension writes on stdout.
	MaxStdoutBytes int64 `json:"max_stdout_bytes"`
	// MaxStderrBytes bounds what it writes on stderr, which is counted and
	// discarded; 0 allows none.
	MaxStderrBytes int64 `json:"max_stderr_bytes"`
	// CleanupTimeMS bounds the cleanup: killing the group, reaping the
	// process and draining what descendants left on the pipes.
	CleanupTimeMS int64 `json:"cleanup_time_ms"`
}

// LimitRange is the range and default of one limit.
type LimitRange struct {
	Name     string
	Default  int64
	Min, Max int64
	field    func(*Limits) *int64
}

// LimitRanges is the one table of the limits: their JSON names, defaults
// and inclusive ranges.
var LimitRanges = []LimitRange{
	{"wall_time_ms", 10_000, 1, 600_000, func(l *Limits) *int64 { return &l.WallTimeMS }},
	{"max_request_bytes", 1 << 20, 1, 64 << 20, func(l *Limits) *int64 { return &l.MaxRequestBytes }},
	{"max_stdout_bytes", 1 << 20, 1, 64 << 20, func(l *Limits) *int64 { return &l.MaxStdoutBytes }},
	{"max_stderr_bytes", 64 << 10, 0, 64 << 20, func(l *Limits) *int64 { return &l.MaxStderrBytes }},
	{"cleanup_time_ms", 1_000, 1, 5_000, func(l *Limits) *int64 { return &l.CleanupTimeMS }},
}

// Field returns a pointer to the limit r describes in l, so a caller (a
// command's flags) can fill it in by name.
func (r LimitRange) Field(l *Limits) *int64 { return r.field(l) }

// DefaultLimits returns the defaults.
func DefaultLimits() Limits {
	var l Limits
	for _, r := range LimitRanges {
		*r.field(&l) = r.Default
	}
	return l
}

// Validate checks every limit against its range.
func (l Limits) Validate() error {
	for _, r := range LimitRanges {
		if v := *r.field(&l); v < r.Min || v > r.Max {
			return newError(CodeInvalidInvocation, fmt.Sprintf("limit %s is out of its range %d to %d", r.Name, r.Min, r.Max))
		}
	}
	return nil
}

// ParseLimits reads a JSON object of limits over the defaults: a member
// sets its limit, a missing one keeps the default. The object is read
// strictly (strict JSON, no unknown or duplicate member, integers only) and
// the result validated; any refusal is invalid_invocation and never echoes
// the input.
func ParseLimits(data []byte) (Limits, error) {
	l := DefaultLimits()
	if err := checkStrict(data); err != nil {
		return Limits{}, newError(CodeInvalidInvocation, "the limits are not strict JSON: "+err.Error())
	}
	var members map[string]json.RawMessage
	if !isObject(data) || json.Unmarshal(data, &members) != nil {
		return Limits{}, newError(CodeInvalidInvocation, "the limits are not a JSON object of integers")
	}
	for name, v := range members {
		r, ok := limitRange(name)
		if !ok {
			return Limits{}, newError(CodeInvalidInvocation, "the limits hold a member that is no limit")
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return Limits{}, newError(CodeInvalidInvocation, fmt.Sprintf("limit %s is not an integer", r.Name))
		}
		*r.field(&l) = n
	}
	if err := l.Validate(); err != nil {
		return Limits{}, err
	}
	return l, nil
}

func limitRange(name string) (LimitRange, bool) {
	for _, r := range LimitRanges {
		if r.Name == name {
			return r, true
		}
	}
	return LimitRange{}, false
}

func (l Limits) wallTime() time.Duration { return time.Duration(l.WallTimeMS) * time.Millisecond }
func (l Limits) cleanupTime() time.Duration {
	return time.Duration(l.CleanupTimeMS) * time.Millisecond
}
