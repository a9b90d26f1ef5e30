package extensiontest

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/protocol"
)

// Scope is the ID of the scope a case generates.
const Scope = "test"

// AgentBinding is the name of the generated binding to the scripted agent,
// and Agent the agent's package and executor name.
const (
	AgentBinding = "agent"
	Agent        = "agent"
)

// Config is the daemon's configuration document (config.json), client's
// one definition of it: a case generates one from its packages' manifests,
// and Case.Config and Step.Config edit it. The daemon checks it whole,
// strictly, so a field it does not know is a refusal, not a silent no-op.
type (
	Config           = client.Config
	ScopeConfig      = client.ScopeConfig
	EntryConfig      = client.EntryConfig
	RouteConfig      = client.RouteConfig
	BindingConfig    = client.BindingConfig
	ConnectionConfig = client.ConnectionConfig
	Settings         = client.Settings
	WebhookSettings  = client.WebhookSettings
)

// cloneConfig is a deep copy of c, through JSON.
func cloneConfig(c Config) Config {
	data, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("extensiontest: the config does not encode: %v", err))
	}
	var out Config
	if err := json.Unmarshal(data, &out); err != nil {
		panic(fmt.Sprintf("extensiontest: the config does not decode: %v", err))
	}
	return out
}

// Generate is the configuration a case starts with, from its packages'
// manifests: one scope, Scope, with an entry of each extension type (its ID
// the type's name), a route for each route handler (creating Work of the
// first work kind the manifests declare, bound to the agent) and the
// binding AgentBinding to the scripted agent, granting the toolbelt and
// every operation the packages declare, with an empty script.
func Generate(manifests ...*protocol.Manifest) Config {
	sc := ScopeConfig{ID: Scope}
	var kinds, ops []string
	for _, m := range manifests {
		for _, wk := range m.Provides.WorkKinds {
			kinds = append(kinds, wk.Name)
		}
		for _, op := range m.Provides.Operations {
			ops = append(ops, op.Name)
		}
	}
	for _, m := range manifests {
		for _, e := range m.Provides.Extensions {
			sc.Entries = append(sc.Entries, EntryConfig{ID: e.Type, Type: e.Type})
		}
		if len(kinds) == 0 {
			continue // a route must create Work of a declared kind
		}
		for _, r := range m.Provides.Routes {
			sc.Routes = append(sc.Routes, RouteConfig{ID: r.Handler, Handler: r.Handler, Kind: kinds[0], Binding: AgentBinding})
		}
	}
	slices.Sort(ops)
	sc.Bindings = []BindingConfig{{Name: AgentBinding, Executor: Agent, Toolbelt: true, Operations: ops,
		ExecutorConfig: map[string]any{"script": []AgentStep{}}}}
	return Config{Scopes: []ScopeConfig{sc}}
}

// AgentStep is one step of the scripted agent's script: a toolbelt call
// of Call with Input, whose answer must hold Expect (every member it names,
// recursively) or be refused with the protocol code ExpectError; Think, a
// pause of a Go duration ("1s", at most 10m: a turn that takes time); or
// Fail, which ends the run failed. RequestID defaults to "<work id>/<step>".
type AgentStep struct {
	Call        string `json:"call,omitempty"`
	Input       any    `json:"input,omitempty"`
	RequestID   string `json:"request_id,omitempty"`
	Expect      any    `json:"expect,omitempty"`
	ExpectError string `json:"expect_error,omitempty"`
	Think       string `json:"think,omitempty"`
	Fail        string `json:"fail,omitempty"`
}

// agentManifest is the bundled scripted agent's manifest, installed beside
// a case's packages so the daemon serves it with `extension-run agent`.
// TestAgentManifestIsTheBundledOne holds it to extensions/agent's own.
const agentManifest = `{
  "name": "agent",
  "title": "Scripted agent",
  "version": "1.0.0",
  "command": ["open-conduit", "extension-run", "agent"],
  "protocol": [1],
  "provides": {
    "executors": [
      {
        "name": "agent",
        "labels": {"toolbelt": "sdk"},
        "fields": [
          {"name": "script", "help": "the steps each run follows: toolbelt calls with their inputs and the result or error code each expects, then an optional failure (see the agent package)", "required": true}
        ]
      }
    ]
  }
}
`
