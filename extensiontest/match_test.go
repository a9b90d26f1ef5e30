package extensiontest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/protocol"
)

func TestEventMatch(t *testing.T) {
	e := client.Event{Source: "notes/test/notes", Family: "notes.note", Type: "note", Schema: "notes.note.v3",
		Payload: json.RawMessage(`{"id":"n1","tags":["a","b"],"meta":{"rev":"1","by":"ada"}}`)}
	for _, m := range []EventMatch{
		{},
		{Family: "notes.note"},
		{Source: "notes/test/notes", Type: "note", Schema: "notes.note.v3"},
		{Payload: map[string]any{"id": "n1"}},
		{Payload: map[string]any{"meta": map[string]any{"by": "ada"}, "tags": []string{"a", "b"}}},
	} {
		assert.True(t, m.matches(e), "%s matches", m)
	}
	for _, m := range []EventMatch{
		{Family: "notes.published"},
		{Type: "other"},
		{Source: "notes"},
		{Payload: map[string]any{"id": "n2"}},
		{Payload: map[string]any{"missing": 1}},
		{Payload: map[string]any{"tags": []string{"a"}}},
		{Payload: map[string]any{"meta": map[string]any{"by": "bob"}}},
	} {
		assert.False(t, m.matches(e), "%s does not match", m)
	}
	assert.False(t, EventMatch{Payload: map[string]any{}}.matches(client.Event{Payload: json.RawMessage(`[1]`)}),
		"an object matcher does not hold in an array")
}

func TestWorkMatch(t *testing.T) {
	w := client.Work{Kind: "notes-review", State: client.WorkDone, Binding: "test/agent",
		Display: &protocol.Display{Title: "Hello"}, Context: json.RawMessage(`{"name":"ada","n":2}`)}
	for _, m := range []WorkMatch{{}, {State: client.WorkDone}, {Kind: "notes-review", Title: "Hello"}, {Context: map[string]any{"n": 2}}} {
		assert.True(t, m.matches(w), "%s matches", m)
	}
	for _, m := range []WorkMatch{{State: client.WorkFailed}, {Title: "hello"}, {Binding: "agent"}, {Context: map[string]any{"n": 3}}} {
		assert.False(t, m.matches(w), "%s does not match", m)
	}
	assert.False(t, WorkMatch{Title: "Hello"}.matches(client.Work{}), "work without a display has no title")
	assert.False(t, WorkMatch{Context: map[string]any{}}.matches(client.Work{}), "work without a context holds none")
}

func TestStepErrorFormat(t *testing.T) {
	err := &StepError{Step: 3, Name: "a step", Description: "why", Expected: "x", Found: "y\nz", Evidence: "--- e\n", Dir: "/tmp/d"}
	assert.Equal(t, "step 3 \"a step\" failed (why)\n  expected: x\n  found:    y\n            z\n--- e\nwork directory kept: /tmp/d\n", err.Error())
}
