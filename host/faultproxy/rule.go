package faultproxy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Fault is what a rule does to the message it fires on.
type Fault string

// The faults (see the package doc).
const (
	Delay       Fault = "delay"
	Drop        Fault = "drop"
	Duplicate   Fault = "duplicate"
	Reorder     Fault = "reorder"
	Truncate    Fault = "truncate"
	Corrupt     Fault = "corrupt"
	CloseStdout Fault = "close-stdout"
	Stall       Fault = "stall"
	Crash       Fault = "crash"
)

// faultInfo says which parameters a fault takes.
type faultInfo struct {
	needsFor, takesFor, takesAt bool
}

// faults is the one table of faults: parsing, String and the docs' list
// read it, so a new fault is one row here and one case in apply.
var faults = map[Fault]faultInfo{
	Delay:       {needsFor: true, takesFor: true},
	Drop:        {},
	Duplicate:   {},
	Reorder:     {},
	Truncate:    {takesAt: true},
	Corrupt:     {},
	CloseStdout: {},
	Stall:       {takesFor: true},
	Crash:       {},
}

// Faults lists every fault's name, sorted.
func Faults() []Fault {
	out := make([]Fault, 0, len(faults))
	for f := range faults {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// Direction is which way a message travels.
type Direction string

const (
	// ToExt: from the host to the extension's stdin.
	ToExt Direction = "to-ext"
	// ToHost: from the extension's stdout to the host.
	ToHost Direction = "to-host"
)

// Kind is what a message is, as far as its line says.
type Kind string

const (
	KindRequest      Kind = "request"
	KindResponse     Kind = "response"
	KindNotification Kind = "notification"
)

// Bounds of a rule's values.
const (
	// MaxRuleBytes bounds a rule's text.
	MaxRuleBytes = 1024
	// MaxMethodBytes bounds a method selector.
	MaxMethodBytes = 128
	// MaxNth bounds nth and at.
	MaxNth = 1 << 30
	// MaxFor bounds for.
	MaxFor = time.Hour
)

// ErrSyntax is wrapped by every refusal of ParseRule.
var ErrSyntax = errors.New("faultproxy: bad rule")

// Rule is one scripted fault: what to do (Fault) to which messages (the
// selectors), with its parameters. The zero value of a selector matches
// everything.
type Rule struct {
	Fault  Fault
	Dir    Direction
	Method string
	Kind   Kind
	// Nth: fire at the Nth counted message, once; 0 fires at every one.
	Nth int
	// For is delay's hold and stall's bound (0: until cleared).
	For time.Duration
	// At is where truncate cuts the line (0: half of it).
	At int
}

// ParseRule parses one rule in the grammar of the package doc, strictly.
func ParseRule(text string) (Rule, error) {
	if len(text) > MaxRuleBytes {
		return Rule{}, fmt.Errorf("%w: over %d bytes", ErrSyntax, MaxRuleBytes)
	}
	words := strings.Fields(text)
	if len(words) == 0 {
		return Rule{}, fmt.Errorf("%w: empty; a rule begins with a fault: %s", ErrSyntax, faultList())
	}
	r := Rule{Fault: Fault(words[0])}
	info, ok := faults[r.Fault]
	if !ok {
		return Rule{}, fmt.Errorf("%w: unknown fault %q; the faults are %s", ErrSyntax, clip(words[0]), faultList())
	}
	seen := map[string]bool{}
	for _, w := range words[1:] {
		key, value, ok := strings.Cut(w, "=")
		if !ok || value == "" {
			return Rule{}, fmt.Errorf("%w: %q is not key=value", ErrSyntax, clip(w))
		}
		if seen[key] {
			return Rule{}, fmt.Errorf("%w: %s given twice", ErrSyntax, clip(key))
		}
		seen[key] = true
		var err error
		switch key {
		case "dir":
			r.Dir = Direction(value)
			if r.Dir != ToExt && r.Dir != ToHost {
				err = fmt.Errorf("dir=%q is not to-ext or to-host", clip(value))
			}
		case "method":
			r.Method = value
			if len(value) > MaxMethodBytes || !printable(value) {
				err = fmt.Errorf("method=%q is not a method name (printable ASCII, at most %d bytes)", clip(value), MaxMethodBytes)
			}
		case "kind":
			r.Kind = Kind(value)
			if r.Kind != KindRequest && r.Kind != KindResponse && r.Kind != KindNotification {
				err = fmt.Errorf("kind=%q is not request, response or notification", clip(value))
			}
		case "nth":
			r.Nth, err = count(key, value)
		case "at":
			if !info.takesAt {
				err = fmt.Errorf("%s takes no at", r.Fault)
				break
			}
			r.At, err = count(key, value)
		case "for":
			if !info.takesFor {
				err = fmt.Errorf("%s takes no for", r.Fault)
				break
			}
			r.For, err = time.ParseDuration(value)
			if err != nil || r.For <= 0 || r.For > MaxFor {
				err = fmt.Errorf("for=%q is not a duration above 0 and at most %v (such as 2s or 150ms)", clip(value), MaxFor)
			}
		default:
			err = fmt.Errorf("unknown key %q; the keys are dir, method, kind, nth, for, at", clip(key))
		}
		if err != nil {
			return Rule{}, fmt.Errorf("%w: %v", ErrSyntax, err)
		}
	}
	if info.needsFor && r.For == 0 {
		return Rule{}, fmt.Errorf("%w: %s needs for=DUR", ErrSyntax, r.Fault)
	}
	return r, nil
}

// ParseRules parses one rule per line; blank lines and lines beginning with
// # are skipped. The error names the line.
func ParseRules(text string) ([]Rule, error) {
	var out []Rule
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r, err := ParseRule(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// String is the rule in its canonical text: ParseRule(r.String()) == r.
func (r Rule) String() string {
	var b strings.Builder
	b.WriteString(string(r.Fault))
	add := func(k, v string) {
		if v != "" {
			b.WriteString(" " + k + "=" + v)
		}
	}
	add("dir", string(r.Dir))
	add("method", r.Method)
	add("kind", string(r.Kind))
	if r.Nth > 0 {
		add("nth", strconv.Itoa(r.Nth))
	}
	if r.For > 0 {
		add("for", r.For.String())
	}
	if r.At > 0 {
		add("at", strconv.Itoa(r.At))
	}
	return b.String()
}

func count(key, value string) (int, error) {
	n, err := strconv.Atoi(value)
	if err != nil || n < 1 || n > MaxNth || strconv.Itoa(n) != value {
		return 0, fmt.Errorf("%s=%q is not a whole number from 1 to %d", key, clip(value), MaxNth)
	}
	return n, nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// clip bounds a word quoted back in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func faultList() string {
	names := make([]string, 0, len(faults))
	for _, f := range Faults() {
		names = append(names, string(f))
	}
	return strings.Join(names, ", ")
}
