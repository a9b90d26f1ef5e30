package client

// Config is the operator's configuration document, config.json: the one
// definition of its shape, for the daemon, which reads it strictly
// (unknown fields, duplicate keys, invalid UTF-8 and trailing data are
// refused with their JSON path) and validates it whole against the
// admitted packages before it applies it as a generation (host/daemon),
// and for whoever writes one (extensiontest, the CLI).
type Config struct {
	// Scopes are the configured scopes, each with its entries, routes and
	// bindings.
	Scopes []ScopeConfig `json:"scopes,omitempty"`
	// Connections are the connections scopes may authorize.
	Connections []ConnectionConfig `json:"connections,omitempty"`
	// Settings are the daemon's settings.
	Settings Settings `json:"settings,omitzero"`
}

// ScopeConfig is one scope.
type ScopeConfig struct {
	// ID names the scope (an identifier, unique).
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
	// Disabled keeps the scope configured but starts nothing for it: its
	// entries reach their packages as disabled and it has no routes.
	Disabled bool `json:"disabled,omitempty"`
	// Entries are config entries of the packages' extension types.
	Entries []EntryConfig `json:"entries,omitempty"`
	// Routes are offered each of the scope's Events, in order.
	Routes []RouteConfig `json:"routes,omitempty"`
	// Bindings say which executor runs the Work a route creates.
	Bindings []BindingConfig `json:"bindings,omitempty"`
	// Connections are the connections the scope authorizes its entries
	// and bindings to name.
	Connections []string `json:"connections,omitempty"`
}

// EntryConfig is one entry of an extension type.
type EntryConfig struct {
	ID     string         `json:"id"`
	Type   string         `json:"type"`
	Config map[string]any `json:"config,omitempty"`
	// Connection names a connection the scope authorizes.
	Connection string `json:"connection,omitempty"`
}

// RouteConfig is one route.
type RouteConfig struct {
	// ID names the route in traces and records; optional.
	ID      string `json:"id,omitempty"`
	Handler string `json:"handler"`
	// Kind is the Work kind the route creates (a declared work kind).
	Kind string `json:"kind"`
	// Binding names one of the scope's bindings; empty creates Work that
	// no executor runs.
	Binding string         `json:"binding,omitempty"`
	Config  map[string]any `json:"config,omitempty"`
}

// BindingConfig is one binding of a scope.
type BindingConfig struct {
	Name           string         `json:"name"`
	Executor       string         `json:"executor"`
	ExecutorConfig map[string]any `json:"executor_config,omitempty"`
	// Toolbelt gives the binding's executions the toolbelt; without it
	// Operations and Toolsets grant nothing.
	Toolbelt bool `json:"toolbelt,omitempty"`
	// Operations and Toolsets are what the toolbelt grants.
	Operations []string `json:"operations,omitempty"`
	Toolsets   []string `json:"toolsets,omitempty"`
	// Connection is the connection the executions act as.
	Connection string `json:"connection,omitempty"`
	// Pool is the capacity pool (default "job").
	Pool string `json:"pool,omitempty"`
}

// ConnectionConfig is one connection. Its secrets are references only:
// env:NAME or file:PATH, resolved by the host when the package asks.
type ConnectionConfig struct {
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Config     map[string]any    `json:"config,omitempty"`
	SecretRefs map[string]string `json:"secret_refs,omitempty"`
}

// Settings are the daemon's settings.
type Settings struct {
	// PassEnv grants daemon environment variables to packages, by
	// package name.
	PassEnv map[string][]string `json:"pass_env,omitempty"`
	// Webhooks configures the webhook listener.
	Webhooks WebhookSettings `json:"webhooks,omitzero"`
	// Pools sets capacity pools' sizes.
	Pools map[string]int `json:"pools,omitempty"`
	// Concurrency is how many agent turns (runs of executors of the
	// default pool) run at once; JobConcurrency how many jobs (executors
	// of pool "jobs"). Zero keeps the default; either overrides the pool
	// of the same name in Pools.
	Concurrency    int `json:"concurrency,omitempty"`
	JobConcurrency int `json:"job_concurrency,omitempty"`
}

// WebhookSettings configures the webhook listener.
type WebhookSettings struct {
	// Listen is the loopback host:port the listener binds.
	Listen string `json:"listen,omitempty"`
	// PublicURL is where the listener is reachable from outside.
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
