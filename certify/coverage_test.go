package certify_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/certify"
)

func hostSent(msg string) certify.WireMessage {
	return certify.WireMessage{Direction: certify.DirectionToExtension, Message: json.RawMessage(msg)}
}

func surfaces(us []certify.Uncovered) []string {
	out := []string{}
	for _, u := range us {
		out = append(out, u.Surface+" "+u.Method)
	}
	return out
}

// Every host-to-extension surface the manifest declares is uncovered until
// the host sends its method (for a named surface, for that name); a call
// the package made, or one for another name, covers nothing.
func TestCoverageListsWhatNoCriterionExercised(t *testing.T) {
	m := loadManifest(t, fullDir)
	all := surfaces(certify.Coverage(m, nil, false))
	for _, want := range []string{"route full route.match", "route samples full route.samples", "operation full.save operation.call",
		"operation full.emit operation.emit", "recurrence full-daily recurrence.next", "work kind trigger full work_kind.trigger",
		"executor full-runner executor.run", "ingress push full ingress.push", "executors.controls.stop executor.stop",
		"operations.commit emit.commit"} {
		assert.Contains(t, all, want)
	}
	for _, lifecycle := range []string{"initialize", "configure", "shutdown"} {
		assert.NotContains(t, strings.Join(all, "\n"), " "+lifecycle+"\n")
	}

	fromExt := func(msg string) certify.WireMessage {
		return certify.WireMessage{Direction: certify.DirectionFromExtension, Message: json.RawMessage(msg)}
	}
	trace := []certify.WireMessage{
		hostSent(`{"jsonrpc":"2.0","id":1,"method":"route.match","params":{"handler":"full"}}`),
		hostSent(`{"jsonrpc":"2.0","id":2,"method":"operation.call","params":{"operation":"another"}}`),
		hostSent(`{"jsonrpc":"2.0","id":3,"method":"executor.stop","params":{"executor":"full-runner"}}`),
		hostSent(`{"jsonrpc":"2.0","id":4,"method":"task.run","params":{"task":"full-tick"}}`),
		fromExt(`{"jsonrpc":"2.0","id":3,"result":{}}`),
		fromExt(`{"jsonrpc":"2.0","id":1,"result":{"matched":false}}`),
		fromExt(`{"jsonrpc":"2.0","id":2,"result":{}}`),
		// A refusal exercised nothing.
		fromExt(`{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"not yet"}}`),
		// The package calling: it exercises nothing of its own.
		fromExt(`{"jsonrpc":"2.0","id":9,"method":"recurrence.next","params":{"recurrence":"full-daily"}}`),
		hostSent(`{"jsonrpc":"2.0","id":9,"result":{}}`),
		{Direction: certify.DirectionToExtension, Text: "not JSON"},
	}
	got := certify.Coverage(m, trace, false)
	left := surfaces(got)
	assert.NotContains(t, left, "route full route.match")
	assert.NotContains(t, left, "executors.controls.stop executor.stop")
	assert.Contains(t, left, "operation full.save operation.call", "a call for another operation covers nothing")
	assert.Contains(t, left, "task full-tick task.run", "a refused call covers nothing")
	assert.Contains(t, left, "recurrence full-daily recurrence.next", "a method the package sent covers nothing")
	assert.Len(t, left, len(all)-2)
	reconcileReason := ""
	for _, u := range got {
		switch u.Method {
		case "event.render":
			assert.Contains(t, u.Reason, "has no rendering criterion", "a method no criterion calls says why")
		case "task.run":
			assert.Contains(t, u.Reason, "answered only with errors (the first: -32000 not yet)", "a surface asked and refused says what the package answered")
		case "ingress.reconcile":
			reconcileReason = u.Reason
			assert.Contains(t, u.Reason, "no source the package registered in configure reconciles")
		default:
			assert.Contains(t, u.Reason, "criteria version 2")
		}
	}
	require.NotEmpty(t, reconcileReason, "the full manifest's ingress.reconcile is uncovered")
	assert.Contains(t, certify.Coverage(m, trace, true)[0].Reason, "--run")

	// Once a configure answer registers a source that reconciles, an
	// unasked scan is the criteria's gap again, not the package's choice.
	registered := append(trace,
		hostSent(`{"jsonrpc":"2.0","id":20,"method":"configure","params":{}}`),
		fromExt(`{"jsonrpc":"2.0","id":20,"result":{"sources":[{"name":"full/s","scope_id":"s","reconcile":true}]}}`))
	for _, u := range certify.Coverage(m, registered, false) {
		if u.Method == "ingress.reconcile" {
			assert.Contains(t, u.Reason, "criteria version 2")
		}
	}
}

// A run reports its uncovered surfaces in every form, with a count in the
// summary, and never as a failure: text, JSON and JUnit (skipped, type
// uncovered).
func TestReportsStateTheUncovered(t *testing.T) {
	p := &fakePackage{}
	cs := []certify.Criterion{criterion("a/uses", usesPackage)}
	out, err := run(t, certify.Config{Dir: fullDir, Criteria: cs, Launch: p.launch}, map[string]certify.Status{"a/uses": certify.StatusPass})
	require.NoError(t, err)
	r := out.report
	require.NotEmpty(t, r.Uncovered)
	assert.Equal(t, len(r.Uncovered), r.Summary.Uncovered)
	assert.Equal(t, certify.ExitOK, r.ExitCode(), "an uncovered surface is stated, not failed")
	var summary bytes.Buffer
	certify.WriteSummary(&summary, r)
	assert.Contains(t, summary.String(), fmt.Sprintf("%d surfaces uncovered", len(r.Uncovered)))
	assert.Contains(t, summary.String(), "UNCOVERED route full (route.match)")

	var j struct {
		Summary   certify.Summary     `json:"summary"`
		Uncovered []certify.Uncovered `json:"uncovered"`
	}
	require.NoError(t, json.Unmarshal(out.json, &j))
	assert.Equal(t, r.Uncovered, j.Uncovered)
	assert.Equal(t, len(r.Uncovered), j.Summary.Uncovered)

	var x struct {
		Suites []struct {
			Skipped int `xml:"skipped,attr"`
			Cases   []struct {
				Name    string `xml:"name,attr"`
				Skipped *struct {
					Type string `xml:"type,attr"`
				} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(out.junit, &x))
	require.Len(t, x.Suites, 1)
	uncovered := 0
	for _, c := range x.Suites[0].Cases {
		if c.Skipped != nil && c.Skipped.Type == "uncovered" {
			uncovered++
			assert.True(t, strings.HasPrefix(c.Name, "uncovered: "), c.Name)
		}
	}
	assert.Equal(t, len(r.Uncovered), uncovered)
	assert.Equal(t, len(r.Uncovered), x.Suites[0].Skipped)

	// The report's own check holds the count to the list.
	r.Summary.Uncovered++
	assert.ErrorContains(t, r.Check(), "uncovered")
}
