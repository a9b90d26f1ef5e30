package extensiontest_test

import (
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	et "github.com/open-conduit/open-conduit/extensiontest"
)

// A test in an author's repository: a signed greeting becomes Work that
// the scripted agent runs, calling the package's operation; an hour later
// on the test clock its reminder fires. (The author's module in
// testdata/author runs this case for real.)
func ExampleTest() {
	testGreeter := func(t *testing.T) {
		sig := et.HMACSHA256("X-Greeter-Signature", []byte("a-test-secret"))
		et.Test(t, et.Case{
			Package: "./cmd/greeter",
			Env:     []string{"GREETER_SECRET=a-test-secret"},
			Config: func(c *et.Config) {
				c.Connections = []et.ConnectionConfig{{Name: "hook", Type: "greeter-webhook",
					SecretRefs: map[string]string{"secret": "env:GREETER_SECRET"}}}
				c.Scope(et.Scope).Connections = []string{"hook"}
				c.Scope(et.Scope).Entry("greeter").Connection = "hook"
			},
			Steps: []et.Step{{
				Name:    "a greeting becomes work the agent replies to",
				Agent:   []et.AgentStep{{Call: "greeter.reply", Input: map[string]string{"name": "ada", "text": "hi"}}},
				Webhook: &et.Webhook{Path: "/greeter/test/greeter", JSON: map[string]string{"id": "g1", "from": "ada"}, Sign: sig},
				Expect: []et.Check{
					et.ExpectEvent(et.EventMatch{Family: "greeter.greeting", Count: 1}),
					et.ExpectWork(et.WorkMatch{State: client.WorkDone, Title: "Reply to ada"}),
					et.ExpectKV("greeter", "reply/ada", map[string]string{"text": "hi"}),
					et.ExpectNoOtherEvent(),
				},
			}, {
				Name:    "an hour later the reminder fires",
				Advance: time.Hour,
				Expect:  []et.Check{et.ExpectEvent(et.EventMatch{Source: "core.timer", Type: "timer.fired"})},
			}},
		})
	}
	_ = testGreeter
}

// Certification from go test: each criterion is a subtest.
func ExampleCertify() {
	testCertify := func(t *testing.T) { et.Certify(t, "./cmd/greeter") }
	_ = testCertify
}
