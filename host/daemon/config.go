package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/protocol"
)

// ConfigFile is the configuration's file name in the config directory.
const ConfigFile = "config.json"

// MaxConfigBytes bounds a configuration document.
const MaxConfigBytes = protocol.MaxManifestBytes

// The configuration document's types are client's (client.Config): one
// definition for the daemon, which validates them here, and for the
// harness and the CLI, which write them.
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

// The diagnostic rules a configuration can break. Each diagnostic names
// one, with the JSON path of the offending value.
const (
	RuleJSON               = "invalid_json"
	RuleUnknownField       = "unknown_field"
	RuleRequired           = "required"
	RuleInvalidID          = "invalid_id"
	RuleDuplicate          = "duplicate"
	RuleUnknownType        = "unknown_type"
	RuleUnknownHandler     = "unknown_handler"
	RuleUnknownWorkKind    = "unknown_work_kind"
	RuleUnknownBinding     = "unknown_binding"
	RuleUnknownExecutor    = "unknown_executor"
	RuleUnknownOperation   = "unknown_operation"
	RuleUnknownToolset     = "unknown_toolset"
	RuleUnknownConnection  = "unknown_connection"
	RuleConnectionType     = "unknown_connection_type"
	RuleNotAuthorized      = "connection_not_authorized"
	RuleSecretRef          = "secret_ref"
	RuleUnknownPackage     = "unknown_package"
	RulePassEnvReserved    = "pass_env_reserved"
	RuleInvalidAddress     = "invalid_address"
	RuleInvalidURL         = "invalid_url"
	RuleInvalidPool        = "invalid_pool"
	RuleToolbeltOff        = "toolbelt_off"
	RuleInvalidConfig      = "invalid_config"
	RuleBindingRefused     = "binding_refused"
	RuleExtensionUnavailbl = "extension_unavailable"
)

// ParseConfig reads a configuration document strictly. A refusal is one
// diagnostic: the document's JSON is checked before its meaning.
func ParseConfig(doc []byte) (*Config, []client.Diagnostic) {
	if len(strings.TrimSpace(string(doc))) == 0 {
		return &Config{}, nil
	}
	if len(doc) > MaxConfigBytes {
		return nil, []client.Diagnostic{{Path: "$", Rule: RuleJSON,
			Message: fmt.Sprintf("the configuration is %d bytes, over the %d allowed", len(doc), MaxConfigBytes)}}
	}
	var c Config
	if err := protocol.DecodeStrict(doc, &c); err != nil {
		d := client.Diagnostic{Path: "$", Rule: RuleJSON, Message: err.Error()}
		var me *protocol.ManifestError
		if errors.As(err, &me) {
			d.Message = me.Message
			if me.Path != "" {
				d.Path = "$." + me.Path
			}
			if me.Rule == protocol.RuleNewerField {
				d.Rule = RuleUnknownField
				d.Message = "unknown field"
				if i := strings.LastIndexAny(d.Path, ".["); i >= 0 {
					d.Message = fmt.Sprintf("unknown field %s", strings.Trim(d.Path[i:], ".[]"))
				}
			}
		}
		return nil, []client.Diagnostic{d}
	}
	return &c, nil
}

// ReadConfigFile reads <dir>/config.json; a missing file is the empty
// configuration (found false).
func ReadConfigFile(dir string) (doc []byte, found bool, err error) {
	f, err := os.Open(filepath.Join(dir, ConfigFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	buf := make([]byte, MaxConfigBytes+1)
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil {
			break
		}
	}
	if n > MaxConfigBytes {
		return nil, true, fmt.Errorf("%s is over %d bytes", ConfigFile, MaxConfigBytes)
	}
	return buf[:n], true, nil
}

// HashConfig is the generation hash of a document: "sha256:<hex>".
func HashConfig(doc []byte) string {
	sum := sha256.Sum256(doc)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// catalogue is what the admitted packages declare, by name, for
// validation and composition.
type catalogue struct {
	types       map[string]string // extension type -> package
	connTypes   map[string]string // connection type -> package
	handlers    map[string]string // route handler -> package
	bindingChk  map[string]bool   // route handlers declared with binding
	workKinds   map[string]string
	executors   map[string]string
	operations  map[string]string
	toolsets    map[string][]string // toolset -> its operations
	packages    map[string]bool
	builtinsOps []string
}

func newCatalogue(ms []*protocol.Manifest) *catalogue {
	c := &catalogue{types: map[string]string{}, connTypes: map[string]string{}, handlers: map[string]string{},
		bindingChk: map[string]bool{}, workKinds: map[string]string{}, executors: map[string]string{},
		operations: map[string]string{}, toolsets: map[string][]string{}, packages: map[string]bool{},
		builtinsOps: protocol.BuiltinOperations()}
	for _, m := range ms {
		c.packages[m.Name] = true
		p := m.Provides
		for _, e := range p.Extensions {
			c.types[e.Type] = m.Name
		}
		for _, t := range p.Connections {
			c.connTypes[t.Type] = m.Name
		}
		for _, r := range p.Routes {
			c.handlers[r.Handler] = m.Name
			if r.Binding {
				c.bindingChk[r.Handler] = true
			}
		}
		for _, k := range p.WorkKinds {
			c.workKinds[k.Name] = m.Name
		}
		for _, e := range p.Executors {
			c.executors[e.Name] = m.Name
		}
		for _, o := range p.Operations {
			c.operations[o.Name] = m.Name
		}
		for _, t := range p.Toolsets {
			for _, o := range t.Operations {
				c.toolsets[t.Name] = append(c.toolsets[t.Name], o.Name)
			}
		}
	}
	return c
}

// diagnostics collects every diagnostic of a document.
type diagnostics []client.Diagnostic

// name checks the field (id or name) that tells an object of kind what at
// path from the others of its set: given, an identifier, and not taken
// (taken says whether another of the set has it; scope, when set, is the
// scope the set belongs to). It reports true when the name is new and good.
func (ds *diagnostics) name(at, field, what, name, scope string, taken func(string) bool) bool {
	path := at + "." + field
	in := ""
	if scope != "" {
		in = fmt.Sprintf(" in scope %q", scope)
	}
	switch {
	case name == "":
		ds.add(path, RuleRequired, "a %s needs a %s", what, field)
	case !protocol.IsIdentifier(name):
		ds.add(path, RuleInvalidID, "%s %s %q is not an identifier", what, field, name)
	case taken(name):
		ds.add(path, RuleDuplicate, "%s %q is defined twice%s", what, name, in)
	default:
		return true
	}
	return false
}

func (ds *diagnostics) add(path, rule, format string, args ...any) {
	*ds = append(*ds, client.Diagnostic{Path: path, Rule: rule, Message: fmt.Sprintf(format, args...)})
}

// checkStatic checks everything about c that the manifests decide: names,
// references between objects, types that exist, secret references and
// settings. It reports every diagnostic, never only the first.
func checkStatic(c *Config, cat *catalogue) []client.Diagnostic {
	var ds diagnostics
	conns := map[string]ConnectionConfig{}
	for i, cn := range c.Connections {
		at := fmt.Sprintf("$.connections[%d]", i)
		if ds.name(at, "name", "connection", cn.Name, "", func(n string) bool { _, ok := conns[n]; return ok }) {
			conns[cn.Name] = cn
		}
		if cn.Type == "" {
			ds.add(at+".type", RuleRequired, "a connection needs a type")
		} else if _, ok := cat.connTypes[cn.Type]; !ok {
			ds.add(at+".type", RuleConnectionType, "no admitted package declares connection type %q", cn.Type)
		}
		for _, key := range sortedKeys(cn.SecretRefs) {
			if err := checkSecretRef(cn.SecretRefs[key]); err != nil {
				ds.add(at+".secret_refs"+pathKey(key), RuleSecretRef, "%v", err)
			}
		}
	}
	scopes := map[string]bool{}
	for i, sc := range c.Scopes {
		at := fmt.Sprintf("$.scopes[%d]", i)
		if ds.name(at, "id", "scope", sc.ID, "", func(n string) bool { return scopes[n] }) {
			scopes[sc.ID] = true
		}
		authorized := map[string]bool{}
		for j, name := range sc.Connections {
			if _, ok := conns[name]; !ok {
				ds.add(fmt.Sprintf("%s.connections[%d]", at, j), RuleUnknownConnection, "connection %q is not defined", name)
			}
			authorized[name] = true
		}
		useConn := func(path, name string) {
			if name == "" {
				return
			}
			if _, ok := conns[name]; !ok {
				ds.add(path, RuleUnknownConnection, "connection %q is not defined", name)
			} else if !authorized[name] {
				ds.add(path, RuleNotAuthorized, "scope %q does not authorize connection %q", sc.ID, name)
			}
		}
		entries := map[string]bool{}
		for j, e := range sc.Entries {
			eat := fmt.Sprintf("%s.entries[%d]", at, j)
			if ds.name(eat, "id", "entry", e.ID, sc.ID, func(n string) bool { return entries[n] }) {
				entries[e.ID] = true
			}
			if e.Type == "" {
				ds.add(eat+".type", RuleRequired, "an entry needs a type")
			} else if _, ok := cat.types[e.Type]; !ok {
				ds.add(eat+".type", RuleUnknownType, "no admitted package declares extension type %q", e.Type)
			}
			useConn(eat+".connection", e.Connection)
		}
		bindings := map[string]bool{}
		for j, b := range sc.Bindings {
			bat := fmt.Sprintf("%s.bindings[%d]", at, j)
			if ds.name(bat, "name", "binding", b.Name, sc.ID, func(n string) bool { return bindings[n] }) {
				bindings[b.Name] = true
			}
			if b.Executor == "" {
				ds.add(bat+".executor", RuleRequired, "a binding needs an executor")
			} else if _, ok := cat.executors[b.Executor]; !ok {
				ds.add(bat+".executor", RuleUnknownExecutor, "no admitted package declares executor %q", b.Executor)
			}
			for k, op := range b.Operations {
				if _, ok := cat.operations[op]; !ok && !slices.Contains(cat.builtinsOps, op) {
					ds.add(fmt.Sprintf("%s.operations[%d]", bat, k), RuleUnknownOperation, "no admitted package declares operation %q", op)
				}
			}
			for k, ts := range b.Toolsets {
				if _, ok := cat.toolsets[ts]; !ok {
					ds.add(fmt.Sprintf("%s.toolsets[%d]", bat, k), RuleUnknownToolset, "no admitted package declares toolset %q", ts)
				}
			}
			if !b.Toolbelt && (len(b.Operations) > 0 || len(b.Toolsets) > 0) {
				ds.add(bat+".toolbelt", RuleToolbeltOff, "binding %q grants operations but has no toolbelt", b.Name)
			}
			useConn(bat+".connection", b.Connection)
		}
		for j, r := range sc.Routes {
			rat := fmt.Sprintf("%s.routes[%d]", at, j)
			if r.ID != "" && !protocol.IsIdentifier(r.ID) {
				ds.add(rat+".id", RuleInvalidID, "route id %q is not an identifier", r.ID)
			}
			if r.Handler == "" {
				ds.add(rat+".handler", RuleRequired, "a route needs a handler")
			} else if _, ok := cat.handlers[r.Handler]; !ok {
				ds.add(rat+".handler", RuleUnknownHandler, "no admitted package declares route handler %q", r.Handler)
			}
			if r.Kind == "" {
				ds.add(rat+".kind", RuleRequired, "a route needs the work kind it creates")
			} else if _, ok := cat.workKinds[r.Kind]; !ok {
				ds.add(rat+".kind", RuleUnknownWorkKind, "no admitted package declares work kind %q", r.Kind)
			}
			if r.Binding != "" && !slices.ContainsFunc(sc.Bindings, func(b BindingConfig) bool { return b.Name == r.Binding }) {
				ds.add(rat+".binding", RuleUnknownBinding, "scope %q has no binding %q", sc.ID, r.Binding)
			}
		}
	}
	s := c.Settings
	for _, name := range sortedKeys(s.PassEnv) {
		at := "$.settings.pass_env" + pathKey(name)
		if !cat.packages[name] {
			ds.add(at, RuleUnknownPackage, "no admitted package is named %q", name)
		}
		for j, v := range s.PassEnv[name] {
			if protocol.ReservedEnv(v) {
				ds.add(fmt.Sprintf("%s[%d]", at, j), RulePassEnvReserved, "variables OS_* and OPEN_CONDUIT_* are the host's and cannot be granted")
			} else if v == "" || strings.ContainsAny(v, "= \x00") {
				ds.add(fmt.Sprintf("%s[%d]", at, j), RuleInvalidID, "%q is not a variable name", v)
			}
		}
	}
	if l := s.Webhooks.Listen; l != "" {
		if err := checkLoopback(l); err != nil {
			ds.add("$.settings.webhooks.listen", RuleInvalidAddress, "%v", err)
		}
	}
	if u := s.Webhooks.PublicURL; u != "" {
		if err := checkPublicURL(u); err != nil {
			ds.add("$.settings.webhooks.public_url", RuleInvalidURL, "%v", err)
		}
	}
	checkConcurrency(&ds, s)
	for _, name := range sortedKeys(s.Pools) {
		if !protocol.IsIdentifier(name) {
			ds.add("$.settings.pools"+pathKey(name), RuleInvalidID, "pool name %q is not an identifier", name)
		}
		if s.Pools[name] <= 0 {
			ds.add("$.settings.pools"+pathKey(name), RuleInvalidPool, "a pool's capacity is at least 1")
		}
	}
	return ds
}

// checkSecretRef accepts env:NAME and file:PATH (an absolute path) and
// nothing else: an inline value is never a reference.
func checkSecretRef(ref string) error {
	kind, rest, ok := strings.Cut(ref, ":")
	switch {
	case !ok || rest == "":
		return errors.New("a secret reference is env:NAME or file:PATH, never an inline value")
	case kind == "env":
		if strings.ContainsAny(rest, "= \x00") {
			return errors.New("env: names a variable")
		}
		return nil
	case kind == "file":
		if !filepath.IsAbs(rest) {
			return errors.New("file: takes an absolute path")
		}
		return nil
	}
	return errors.New("a secret reference is env:NAME or file:PATH, never an inline value")
}

func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("listen is host:port")
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("the webhook listener binds a loopback address only")
	}
	return nil
}

func checkPublicURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("public_url is an http or https URL with a host")
	}
	if u.User != nil {
		return errors.New("public_url carries no credentials")
	}
	return nil
}

// pathKey is a map key as a JSON path element.
func pathKey(k string) string {
	if protocol.IsIdentifier(k) {
		return "." + k
	}
	b, _ := json.Marshal(k)
	return "[" + string(b) + "]"
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// rawObject is a config object as the package receives it.
func rawObject(m map[string]any) json.RawMessage {
	if m == nil {
		return json.RawMessage(`{}`)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}
