package extensiontest

import (
	"encoding/json"
	"fmt"
	"slices"

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

// Config is the daemon's configuration document (config.json), in the
// shape the daemon reads it: a case generates one from its packages'
// manifests, and Case.Config and Step.Config edit it. The daemon checks it
// whole, strictly, so a field it does not know is a refusal, not a silent
// no-op.
type Config struct {
	Scopes      []ScopeConfig      `json:"scopes,omitempty"`
	Connections []ConnectionConfig `json:"connections,omitempty"`
	Settings    Settings           `json:"settings,omitzero"`
}

// ScopeConfig is one scope.
type ScopeConfig struct {
	ID          string          `json:"id"`
	Title       string          `json:"title,omitempty"`
	Disabled    bool            `json:"disabled,omitempty"`
	Entries     []EntryConfig   `json:"entries,omitempty"`
	Routes      []RouteConfig   `json:"routes,omitempty"`
	Bindings    []BindingConfig `json:"bindings,omitempty"`
	Connections []string        `json:"connections,omitempty"`
}

// EntryConfig is one entry of an extension type.
type EntryConfig struct {
	ID         string         `json:"id"`
	Type       string         `json:"type"`
	Config     map[string]any `json:"config,omitempty"`
	Connection string         `json:"connection,omitempty"`
}

// RouteConfig is one route.
type RouteConfig struct {
	ID      string         `json:"id,omitempty"`
	Handler string         `json:"handler"`
	Kind    string         `json:"kind"`
	Binding string         `json:"binding,omitempty"`
	Config  map[string]any `json:"config,omitempty"`
}

// BindingConfig is one binding of a scope.
type BindingConfig struct {
	Name           string         `json:"name"`
	Executor       string         `json:"executor"`
	ExecutorConfig map[string]any `json:"executor_config,omitempty"`
	Toolbelt       bool           `json:"toolbelt,omitempty"`
	Operations     []string       `json:"operations,omitempty"`
	Toolsets       []string       `json:"toolsets,omitempty"`
	Connection     string         `json:"connection,omitempty"`
	Pool           string         `json:"pool,omitempty"`
}

// ConnectionConfig is one connection; its secrets are references
// (env:NAME, file:PATH), never values.
type ConnectionConfig struct {
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Config     map[string]any    `json:"config,omitempty"`
	SecretRefs map[string]string `json:"secret_refs,omitempty"`
}

// Settings are the daemon's settings.
type Settings struct {
	PassEnv        map[string][]string `json:"pass_env,omitempty"`
	Webhooks       WebhookSettings     `json:"webhooks,omitzero"`
	Pools          map[string]int      `json:"pools,omitempty"`
	Concurrency    int                 `json:"concurrency,omitempty"`
	JobConcurrency int                 `json:"job_concurrency,omitempty"`
}

// WebhookSettings configures the webhook listener.
type WebhookSettings struct {
	Listen    string `json:"listen,omitempty"`
	PublicURL string `json:"public_url,omitempty"`
}

// Scope returns the scope with the given ID, nil if there is none.
func (c *Config) Scope(id string) *ScopeConfig {
	for i := range c.Scopes {
		if c.Scopes[i].ID == id {
			return &c.Scopes[i]
		}
	}
	return nil
}

// Entry returns the scope's entry with the given ID, nil if none.
func (s *ScopeConfig) Entry(id string) *EntryConfig {
	for i := range s.Entries {
		if s.Entries[i].ID == id {
			return &s.Entries[i]
		}
	}
	return nil
}

// Binding returns the scope's binding with the given name, nil if none.
func (s *ScopeConfig) Binding(name string) *BindingConfig {
	for i := range s.Bindings {
		if s.Bindings[i].Name == name {
			return &s.Bindings[i]
		}
	}
	return nil
}

// clone is a deep copy of c, through JSON.
func (c Config) clone() Config {
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
