package faultproxy_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host/faultproxy"
)

func TestParseRuleAcceptsTheGrammar(t *testing.T) {
	cases := []struct {
		text string
		want faultproxy.Rule
	}{
		{"crash method=route.match nth=1", faultproxy.Rule{Fault: faultproxy.Crash, Method: "route.match", Nth: 1}},
		{"delay method=operation.call for=2s", faultproxy.Rule{Fault: faultproxy.Delay, Method: "operation.call", For: 2 * time.Second}},
		{"drop dir=to-ext nth=3", faultproxy.Rule{Fault: faultproxy.Drop, Dir: faultproxy.ToExt, Nth: 3}},
		{"  truncate   at=10 kind=response dir=to-host ", faultproxy.Rule{Fault: faultproxy.Truncate, Dir: faultproxy.ToHost, Kind: faultproxy.KindResponse, At: 10}},
		{"stall", faultproxy.Rule{Fault: faultproxy.Stall}},
		{"stall for=150ms kind=notification", faultproxy.Rule{Fault: faultproxy.Stall, Kind: faultproxy.KindNotification, For: 150 * time.Millisecond}},
		{"close-stdout method=$/cancel", faultproxy.Rule{Fault: faultproxy.CloseStdout, Method: "$/cancel"}},
		{"duplicate", faultproxy.Rule{Fault: faultproxy.Duplicate}},
		{"reorder dir=to-host", faultproxy.Rule{Fault: faultproxy.Reorder, Dir: faultproxy.ToHost}},
		{"corrupt kind=request", faultproxy.Rule{Fault: faultproxy.Corrupt, Kind: faultproxy.KindRequest}},
	}
	for _, tc := range cases {
		got, err := faultproxy.ParseRule(tc.text)
		require.NoError(t, err, tc.text)
		assert.Equal(t, tc.want, got, tc.text)
		again, err := faultproxy.ParseRule(got.String())
		require.NoError(t, err, got.String())
		assert.Equal(t, got, again, "String round-trips %q", got.String())
	}
}

// Every refusal names what is wrong with the word it refuses.
func TestParseRuleRefusesWithClearErrors(t *testing.T) {
	cases := []struct{ text, says string }{
		{"", "empty"},
		{"   ", "empty"},
		{"explode", `unknown fault "explode"`},
		{"Crash", `unknown fault "Crash"`},
		{"crash nth", `"nth" is not key=value`},
		{"crash nth=", `"nth=" is not key=value`},
		{"crash nth=0", `nth="0" is not a whole number`},
		{"crash nth=-1", `nth="-1" is not a whole number`},
		{"crash nth=01", `nth="01" is not a whole number`},
		{"crash nth=1 nth=2", "nth given twice"},
		{"crash nth=99999999999", "is not a whole number"},
		{"drop dir=sideways", `dir="sideways" is not to-ext or to-host`},
		{"drop kind=reply", `kind="reply" is not request, response or notification`},
		{"drop method=a\x01b", "is not a method name"},
		{"drop method=" + strings.Repeat("m", 129), "is not a method name"},
		{"drop colour=red", `unknown key "colour"`},
		{"delay method=x", "delay needs for=DUR"},
		{"delay for=soon", `for="soon" is not a duration`},
		{"delay for=-1s", `for="-1s" is not a duration`},
		{"delay for=2h", `for="2h" is not a duration`},
		{"drop for=1s", "drop takes no for"},
		{"crash at=3", "crash takes no at"},
		{"truncate at=x", `at="x" is not a whole number`},
		{strings.Repeat("x", faultproxy.MaxRuleBytes+1), "over 1024 bytes"},
	}
	for _, tc := range cases {
		_, err := faultproxy.ParseRule(tc.text)
		require.Error(t, err, "%q", tc.text)
		assert.ErrorIs(t, err, faultproxy.ErrSyntax, tc.text)
		assert.Contains(t, err.Error(), tc.says, "%q", tc.text)
	}
}

func TestParseRulesNamesTheLine(t *testing.T) {
	rules, err := faultproxy.ParseRules("# the drill's faults\ncrash nth=2\n\n  drop dir=to-host\n")
	require.NoError(t, err)
	assert.Equal(t, []faultproxy.Rule{{Fault: faultproxy.Crash, Nth: 2}, {Fault: faultproxy.Drop, Dir: faultproxy.ToHost}}, rules)
	_, err = faultproxy.ParseRules("crash\nboom\n")
	require.ErrorIs(t, err, faultproxy.ErrSyntax)
	assert.Contains(t, err.Error(), "line 2")
}

// The package doc lists every fault: a new fault cannot go undocumented.
func TestEveryFaultIsParsedAndNamed(t *testing.T) {
	require.Len(t, faultproxy.Faults(), 9)
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	for _, f := range faultproxy.Faults() {
		assert.Contains(t, string(doc), "//\t"+string(f)+" ", "the package doc lists %s", f)
		text := string(f)
		if f == faultproxy.Delay {
			text += " for=1s"
		}
		r, err := faultproxy.ParseRule(text)
		require.NoError(t, err, text)
		assert.Equal(t, f, r.Fault)
	}
}

func FuzzParseRule(f *testing.F) {
	// Seeds live in testdata/fuzz/FuzzParseRule as well.
	f.Add("crash method=route.match nth=1")
	f.Add("delay for=1s")
	f.Fuzz(func(t *testing.T, text string) {
		r, err := faultproxy.ParseRule(text)
		if err != nil {
			if !strings.Contains(err.Error(), "faultproxy: bad rule") {
				t.Fatalf("refusal %v does not wrap ErrSyntax", err)
			}
			return
		}
		again, err := faultproxy.ParseRule(r.String())
		if err != nil || again != r {
			t.Fatalf("%q parsed as %+v, whose String %q parses as %+v, %v", text, r, r.String(), again, err)
		}
	})
}
