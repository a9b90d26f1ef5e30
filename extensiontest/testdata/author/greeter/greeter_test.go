package greeter_test

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	et "github.com/open-conduit/open-conduit/extensiontest"

	"example.com/greeter/greeter"
)

const secret = "a-test-secret"

// greeterCase is a case of release 1 whose entry serves signed webhooks.
func greeterCase(steps ...et.Step) et.Case {
	return et.Case{
		Package: "../cmd/greeter",
		Env:     []string{"GREETER_SECRET=" + secret},
		Config: func(c *et.Config) {
			c.Connections = append(c.Connections, et.ConnectionConfig{Name: "hook", Type: greeter.ConnectionType,
				SecretRefs: map[string]string{greeter.SecretKey: "env:GREETER_SECRET"}})
			sc := c.Scope(et.Scope)
			sc.Connections = []string{"hook"}
			sc.Entry(greeter.Name).Connection = "hook"
		},
		Steps: steps,
	}
}

// greeting is a signed delivery of one greeting.
func greeting(id, from string) *et.Webhook {
	return &et.Webhook{Path: greeter.WebhookPath(et.Scope, greeter.Name), JSON: greeter.Greeting{ID: id, From: from},
		Sign: et.HMACSHA256(greeter.SignatureHeader, []byte(secret))}
}

func TestWebhookBecomesWorkTheAgentReplies(t *testing.T) {
	t.Parallel()
	et.Test(t, greeterCase(
		et.Step{
			Name:        "a signed greeting becomes work",
			Description: "the agent keeps a reply, and a bad call is refused as invalid",
			Agent: []et.AgentStep{
				{Call: greeter.OpReply, Input: greeter.Reply{Name: "ada", Text: "hello ada"},
					Expect: map[string]any{"namespace": greeter.NamespaceV1, "key": "reply/ada"}},
				{Call: greeter.OpReply, Input: map[string]any{}, ExpectError: "invalid"},
			},
			Webhook: greeting("g1", "ada"),
			Expect: []et.Check{
				et.ExpectEvent(et.EventMatch{Family: greeter.FamilyGreeting, Type: "received", Payload: map[string]any{"from": "ada"}, Count: 1}),
				et.ExpectWork(et.WorkMatch{Kind: greeter.WorkKind, State: client.WorkDone, Title: "Reply to ada",
					Context: map[string]any{"name": "ada"}, Count: 1}),
				et.ExpectKV(greeter.NamespaceV1, "reply/ada", map[string]any{"text": "hello ada"}),
				et.ExpectNoOtherEvent(),
			},
		},
		et.Step{
			Name:    "an unsigned greeting is refused",
			Webhook: &et.Webhook{Path: greeter.WebhookPath(et.Scope, greeter.Name), JSON: greeter.Greeting{ID: "g2", From: "eve"}, Status: http.StatusUnauthorized},
			Expect:  []et.Check{et.ExpectNoEvent(et.EventMatch{})},
		},
	))
}

func TestReminderFiresOnTheAdvancedClock(t *testing.T) {
	t.Parallel()
	at := et.DefaultStart.Add(time.Hour)
	et.Test(t, greeterCase(
		et.Step{
			Name:    "the agent arms a reminder for an hour from now",
			Agent:   []et.AgentStep{{Call: greeter.OpRemind, Input: greeter.Remind{Name: "ada", At: at}}},
			Webhook: greeting("g1", "ada"),
			Expect: []et.Check{
				et.ExpectWork(et.WorkMatch{Title: "Reply to ada", State: client.WorkDone}),
				et.ExpectNoEvent(et.EventMatch{Family: greeter.Reminder}),
			},
		},
		et.Step{
			Name:    "an hour later the reminder fires and becomes work",
			Agent:   []et.AgentStep{},
			Advance: time.Hour,
			Expect: []et.Check{
				et.ExpectEvent(et.EventMatch{Source: "core.timer", Family: greeter.Reminder, Type: "timer.fired", Payload: map[string]any{"name": "ada"}}),
				et.ExpectWork(et.WorkMatch{Title: "Greet ada again", State: client.WorkDone}),
			},
		},
	))
}

func TestRepliesMigrateAcrossTheUpdate(t *testing.T) {
	t.Parallel()
	et.Test(t, greeterCase(
		et.Step{
			Name:    "release 1 keeps a reply under its layout",
			Agent:   []et.AgentStep{{Call: greeter.OpReply, Input: greeter.Reply{Name: "ada", Text: "hi"}}},
			Webhook: greeting("g1", "ada"),
			Expect:  []et.Check{et.ExpectKV(greeter.NamespaceV1, "reply/ada", map[string]any{"text": "hi"})},
		},
		et.Step{
			Name:        "release 2 migrates it",
			Description: "configure runs Migrate 1→2 before the package is ready",
			Update:      "../cmd/greeter-v2",
			Expect: []et.Check{
				et.ExpectNoKV(greeter.NamespaceV1, "reply/ada"),
				et.ExpectKV(greeter.NamespaceV2, "ada", map[string]any{"name": "ada", "text": "hi"}),
			},
		},
		et.Step{
			Name:    "release 2 keeps new replies under its layout",
			Agent:   []et.AgentStep{{Call: greeter.OpReply, Input: greeter.Reply{Name: "bob", Text: "hey"}, Expect: map[string]any{"namespace": greeter.NamespaceV2}}},
			Webhook: greeting("g2", "bob"),
			Expect:  []et.Check{et.ExpectKV(greeter.NamespaceV2, "bob", map[string]any{"text": "hey"})},
		},
	))
}

func TestCrashAndRecovery(t *testing.T) {
	t.Parallel()
	et.Test(t, greeterCase(
		et.Step{
			Name:        "a killed package is restarted and serves",
			KillPackage: greeter.Name,
			Webhook:     greeting("g1", "ada"),
			Expect:      []et.Check{et.ExpectWork(et.WorkMatch{Title: "Reply to ada", State: client.WorkDone})},
		},
		et.Step{
			Name:    "after the daemon is killed it keeps what it accepted and serves again",
			Crash:   true,
			Webhook: greeting("g2", "bob"),
			Expect: []et.Check{
				et.ExpectWork(et.WorkMatch{State: client.WorkDone, Count: 2}),
				et.ExpectEvent(et.EventMatch{Family: greeter.FamilyGreeting, Count: 1}),
			},
		},
	))
}

// TestAFailingStepSaysWhichStep: a step that cannot pass fails with its
// number and name first, then what was expected and found.
func TestAFailingStepSaysWhichStep(t *testing.T) {
	t.Parallel()
	c := greeterCase(
		et.Step{Name: "a greeting", Webhook: greeting("g1", "ada"),
			Expect: []et.Check{et.ExpectWork(et.WorkMatch{State: client.WorkDone})}},
		et.Step{Name: "a reply nobody kept", Description: "the agent's script is empty",
			Expect: []et.Check{et.ExpectKV(greeter.NamespaceV1, "reply/nobody", nil)}},
	)
	c.Timeout = 2 * time.Second
	err := et.Run(t, c)
	if err == nil {
		t.Fatal("the case passed; its second step cannot")
	}
	if se, ok := err.(*et.StepError); ok {
		defer os.RemoveAll(se.Dir)
	}
	msg := err.Error()
	for _, want := range []string{
		`step 2 "a reply nobody kept" failed (the agent's script is empty)` + "\n",
		"  expected: a KV entry greeter/reply/nobody\n",
		"  found:    no such entry\n",
		"--- daemon log",
		"work directory kept: ",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failure does not say %q:\n%s", want, msg)
		}
	}
	if !strings.HasPrefix(msg, "step 2 ") {
		t.Errorf("the failure does not start with the step's number:\n%s", msg)
	}
}
