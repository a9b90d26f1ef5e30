package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The manifest's refusals are not wire codes: they stay on the side that
// reads the file.
var (
	// ErrInvalidManifest: the manifest breaks a rule of this build.
	ErrInvalidManifest = errors.New("invalid manifest")
	// ErrNewerManifest: the manifest uses something this build does not
	// know (a field, a permission, an executor label), so the package needs
	// a newer Open Conduit. Additive manifest fields ship without a new
	// protocol version, so this is not "invalid".
	ErrNewerManifest = errors.New("the manifest needs a newer Open Conduit")
)

// Limits of manifest texts.
const (
	MaxTitleRunes     = 64   // a title, in characters
	MaxVersionBytes   = 64   // the release version
	MaxSummaryBytes   = 200  // an operation's or page's summary
	MaxGuidanceBytes  = 4096 // an operation's agent guidance
	MaxFieldHelpBytes = 400  // a field's help
	MaxLossBytes      = 200  // a family's loss statement
	MaxDottedBytes    = 128  // a dotted name
)

// ManifestError is one refusal of a manifest: the rule it breaks (see
// ManifestRules), the JSON path of the offending value ("" for the whole
// document) and a message for the author. It matches ErrNewerManifest when
// its rule is one of the "newer." rules, and otherwise ErrInvalidManifest
// and ErrInvalid.
type ManifestError struct {
	// Rule is the ID of the rule broken, such as "name.reserved".
	Rule string
	// Path is the JSON path of the offending value, such as
	// "provides.operations[2].summary"; "" for the whole document.
	Path string
	// Message says what is wrong, for the manifest's author.
	Message string
	// Line and Column locate the refusal in the document, both from 1
	// (the column counts characters); 0 when it has no place in the text,
	// as for the refusals of Validate, which reads a decoded manifest.
	Line, Column int

	offset int // the byte offset behind Line and Column, while decoding
}

func (e *ManifestError) Error() string {
	return fmt.Sprintf("manifest: %s: %s [%s]", e.Where(), e.Message, e.Rule)
}

// Where says where the refusal is, for a person: the JSON path, the line
// and column, both ("provides.routes[0] (line 3, column 14)") or, for the
// whole document, "the manifest".
func (e *ManifestError) Where() string {
	switch {
	case e.Line > 0 && e.Path != "":
		return fmt.Sprintf("%s (line %d, column %d)", e.Path, e.Line, e.Column)
	case e.Line > 0:
		return fmt.Sprintf("line %d, column %d", e.Line, e.Column)
	case e.Path != "":
		return e.Path
	}
	return "the manifest"
}

// Newer reports whether the refusal means the manifest needs a newer build.
func (e *ManifestError) Newer() bool { return strings.HasPrefix(e.Rule, "newer.") }

// Is matches ErrNewerManifest for a "newer." rule, and ErrInvalidManifest and
// the sentinel ErrInvalid for every other rule.
func (e *ManifestError) Is(target error) bool {
	switch target {
	case ErrNewerManifest:
		return e.Newer()
	case ErrInvalidManifest:
		return !e.Newer()
	}
	if t, ok := target.(*Error); ok {
		return t.Code == CodeInvalid && !e.Newer()
	}
	return false
}

// ManifestErrors returns the manifest refusals in err, in order: Validate
// joins every refusal it finds.
func ManifestErrors(err error) []*ManifestError {
	var out []*ManifestError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if me, ok := err.(*ManifestError); ok {
			out = append(out, me)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// ManifestRule is one rule a manifest must keep.
type ManifestRule struct {
	// ID is stable: tools and tests match on it.
	ID string
	// Summary says the rule in one line.
	Summary string
}

// The rule IDs. The "json." rules are the strict reader's; the "newer."
// rules mean the manifest needs a newer Open Conduit (ErrNewerManifest).
const (
	RuleJSONSize           = "json.size"
	RuleJSONUTF8           = "json.utf8"
	RuleJSONSyntax         = "json.syntax"
	RuleJSONTrailing       = "json.trailing"
	RuleJSONDepth          = "json.depth"
	RuleJSONDuplicateKey   = "json.duplicate-key"
	RuleJSONNumber         = "json.number"
	RuleJSONType           = "json.type"
	RuleNewerField         = "newer.field"
	RuleNewerStorage       = "newer.storage"
	RuleNewerExecutorLabel = "newer.executor-label"
	RuleNewerPermission    = "newer.permission"
)

var manifestRules = []ManifestRule{
	{RuleJSONSize, fmt.Sprintf("the manifest is at most %d bytes", MaxManifestBytes)},
	{RuleJSONUTF8, "the manifest is valid UTF-8"},
	{RuleJSONSyntax, "the manifest is well-formed JSON"},
	{RuleJSONTrailing, "nothing follows the manifest's object"},
	{RuleJSONDepth, fmt.Sprintf("the JSON nests at most %d levels", MaxManifestDepth)},
	{RuleJSONDuplicateKey, "no object repeats a member name"},
	{RuleJSONNumber, "every number is finite and fits its field"},
	{RuleJSONType, "every value has its field's JSON type (null only for lists, objects and optional objects)"},
	{RuleNewerField, "every field is known (an unknown one needs a newer Open Conduit)"},
	{RuleNewerStorage, "storage is never declared: the namespaced KV is always there (needs a newer Open Conduit)"},
	{RuleNewerExecutorLabel, "executor labels are interrupt, inject, resume, workspace and toolbelt only, so no semantic label (needs a newer Open Conduit)"},
	{RuleNewerPermission, "every permission is known (an unknown one needs a newer Open Conduit)"},
	{"protocol.supported", "the protocol list includes a version this build supports"},
	{"name.identifier", "the name is an identifier"},
	{"name.reserved", "the name is not reserved (core, execution, manual, open-conduit, os)"},
	{"title.line", fmt.Sprintf("the title is one line of at most %d characters", MaxTitleRunes)},
	{"version.line", fmt.Sprintf("the version is set, one line of at most %d bytes", MaxVersionBytes)},
	{"command.required", "the command is set"},
	{"command.inside", "the command is open-conduit extension-run <name> or a program inside the extension directory"},
	{RuleCommandSymlink, "the command's program, with every symbolic link on its path resolved, stays inside the extension directory (checked on the package's files)"},
	{"names.identifier", "identifier-shaped names (types, handlers, executors, providers, tasks, work kinds, recurrences, pages) are the name or begin with name-"},
	{"names.dotted", "dotted names (families, operations, toolsets) begin with name."},
	{"names.form", "checks and probes are named by identifiers"},
	{"names.duplicate", "no name is declared twice among its kind"},
	{"families.loss", "a family that is not re-derivable states its loss in one line; a re-derivable one states none"},
	{"extensions.ingress-families", "an ingress type declares its families"},
	{"extensions.webhooks-ingress", "only an ingress type has webhooks"},
	{"work_kinds.route", "work kinds need a route handler"},
	{"operations.kind", "an operation's kind is handler, wait or emit"},
	{"operations.commit", "only an emit operation commits"},
	{"operations.serves", "only a handler serves a capability, named like an operation"},
	{"operations.summary", fmt.Sprintf("an operation's summary is one line of at most %d bytes", MaxSummaryBytes)},
	{"operations.guidance", fmt.Sprintf("an operation's guidance is at most %d bytes", MaxGuidanceBytes)},
	{"operations.input", "an operation's input schema is a JSON object (of type object)"},
	{"operations.dependency-filter", "only a wait operation has a dependency filter"},
	{"targets.kind", "a wait target kind is lower-case letters, digits, - or _"},
	{"targets.duplicate", "each wait target kind is declared once"},
	{"entry_gated.requires", "entry_gated needs operations and an extension type"},
	{"entry_named.type", "entry_named needs an extension type"},
	{"toolsets.empty", "a toolset grants at least one operation"},
	{"toolsets.operation", "a toolset's operations are declared by the manifest or are builtins (" + strings.Join(BuiltinOperations(), ", ") + ")"},
	{"toolsets.operation-duplicate", "a toolset grants each operation once"},
	{"toolsets.since", "a toolset operation's since is not negative"},
	{"executors.toolbelt", "an executor's toolbelt label is none, cli, mcp or sdk"},
	{"executors.pool", "an executor's pool is empty (agent turns) or jobs"},
	{"launch_names.control", "launch names need the interactive_launch control"},
	{"launch_names.name", "launch names are identifiers"},
	{"launch_names.duplicate", "launch names repeat neither one another nor an executor of the manifest"},
	{"resources.modes", "resource modes are distinct values of shared, work and fresh"},
	{"tunnels.type", "a tunnel type is the extension's name or begins with it"},
	{"tasks.interval", "a task's interval is a duration of at least one second"},
	{"playbooks.inside", "playbook directories stay inside the extension directory"},
	{RulePlaybooksSymlink, "playbook directories, and every link inside them, resolved, stay inside the extension directory (checked on the package's files)"},
	{"external_stores.connection", "an external store names a declared connection type"},
	{"settings.field", "settings are distinct top-level field names"},
	{"settings.type", "a setting's type is string, boolean, number or strings"},
	{"settings.default", "a setting's default is of its type"},
	{"settings.credential", "settings and describe name no field that can carry a credential"},
	{"describe.fields", "describe names its list, name and detail fields"},
	{"fields.name", "a type's fields name distinct fields (a connection's secret keys apart from its config fields)"},
	{"fields.help", fmt.Sprintf("a field's help is one line of at most %d bytes", MaxFieldHelpBytes)},
	{"fields.required-default", "a required field has no default"},
	{"fields.options", "a field's options are distinct, non-empty and include its default"},
	{"fields.secret", "only a connection type's fields are secret"},
	{"fields.settings-default", "a field's default agrees with the same field's settings default"},
	{"permissions.duplicate", "each permission is asked for once"},
	{"start_gate.permission", "start_gate needs the work.start_gate permission"},
	{"operation_gate.permission", "operation_gate needs the operation.gate permission"},
	{"config_candidate.permission", "config_candidate needs the config.read permission"},
	{"pages.count", fmt.Sprintf("at most %d pages", MaxPages)},
	{"pages.title", fmt.Sprintf("a page's title is one line of at most %d characters", MaxTitleRunes)},
	{"pages.summary", fmt.Sprintf("a page's summary is one line of at most %d bytes", MaxSummaryBytes)},
	{"pages.entry", "a page's entry names an extension type of the manifest"},
	{"pages.work_kind", "a page's work_kind names a work kind of the manifest"},
	{"pages.route", "a page's route names a route handler of the manifest"},
	{"pages.start", "a page names its start action"},
	{"pages.compose", "a page's compose actions are distinct one-line names"},
	{"pages.actions", "pages need the actions surface"},
	{"schemas.base", "a schema base is a dotted name under the extension's name without a version suffix"},
	{"schemas.versions", "a schema's readable versions are positive and strictly increasing"},
	{"kv_version.negative", "kv_version is not negative"},
}

// ManifestRules lists every rule a manifest is checked against, by ID.
func ManifestRules() []ManifestRule { return slices.Clone(manifestRules) }

// Validate checks every rule of ManifestRules that applies to a decoded
// manifest. It returns nil, or every refusal it finds joined with
// errors.Join, in document order; each is a *ManifestError (see
// ManifestErrors). errors.Is(err, ErrNewerManifest) holds when any refusal
// means the manifest needs a newer build.
func (m *Manifest) Validate() error {
	v := &validator{m: m}
	v.run()
	return errors.Join(v.errs...)
}

type validator struct {
	m      *Manifest
	nameOK bool // names can be checked against the extension's name
	errs   []error
}

func (v *validator) fail(rule, path, format string, args ...any) {
	v.errs = append(v.errs, &ManifestError{Rule: rule, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) run() {
	m := v.m
	p := &m.Provides
	v.header()

	// Names, kind by kind.
	types := map[string]bool{}
	families := map[string]bool{}
	for i, x := range p.Extensions {
		at := fmt.Sprintf("provides.extensions[%d]", i)
		v.ident(at+".type", "extension type", x.Type, types)
		for j, f := range x.Families {
			fat := fmt.Sprintf("%s.families[%d]", at, j)
			v.dotted(fat+".name", "family", f.Name, families)
			switch {
			case f.Rederivable && f.Loss != "":
				v.fail("families.loss", fat+".loss", "a re-derivable family loses nothing, so it states no loss")
			case !f.Rederivable && f.Loss == "":
				v.fail("families.loss", fat+".loss", "family %q is not re-derivable, so it must state what is lost with its Events", f.Name)
			case f.Loss != "" && (!isOneLine(f.Loss) || len(f.Loss) > MaxLossBytes):
				v.fail("families.loss", fat+".loss", "the loss is one line of at most %d bytes", MaxLossBytes)
			}
		}
		if x.Ingress && len(x.Families) == 0 {
			v.fail("extensions.ingress-families", at+".families", "ingress type %q declares no families", x.Type)
		}
		if x.Webhooks && !x.Ingress {
			v.fail("extensions.webhooks-ingress", at+".webhooks", "type %q has webhooks but is not an ingress type", x.Type)
		}
		settings := v.settings(at, x.Settings)
		if x.Describe != nil {
			for _, f := range []struct{ key, name string }{{"list", x.Describe.List}, {"name", x.Describe.Name}, {"detail", x.Describe.Detail}} {
				fp := at + ".describe." + f.key
				switch {
				case !isFieldName(f.name):
					v.fail("describe.fields", fp, "describe names its %s field", f.key)
				case credentialField(f.name):
					v.fail("settings.credential", fp, "describe may not show %q, a field that can carry a credential", f.name)
				}
			}
		}
		v.fields(at, x.Fields, false, settings)
	}

	connections := map[string]bool{}
	for i, c := range p.Connections {
		at := fmt.Sprintf("provides.connections[%d]", i)
		v.ident(at+".type", "connection type", c.Type, connections)
		v.fields(at, c.Fields, true, nil)
	}

	handlers := map[string]bool{}
	for i, r := range p.Routes {
		at := fmt.Sprintf("provides.routes[%d]", i)
		v.ident(at+".handler", "route handler", r.Handler, handlers)
		v.fields(at, r.Fields, false, nil)
	}

	kinds := map[string]bool{}
	for i, k := range p.WorkKinds {
		v.ident(fmt.Sprintf("provides.work_kinds[%d].name", i), "work kind", k.Name, kinds)
	}
	if len(p.WorkKinds) > 0 && len(p.Routes) == 0 {
		v.fail("work_kinds.route", "provides.work_kinds", "work kinds need a route handler to create their Work")
	}

	recurrences := map[string]bool{}
	for i, r := range p.Recurrences {
		v.ident(fmt.Sprintf("provides.recurrences[%d].name", i), "recurrence", r.Name, recurrences)
	}

	operations := map[string]bool{}
	for i, o := range p.Operations {
		v.operation(fmt.Sprintf("provides.operations[%d]", i), o, operations)
	}

	targets := map[string]bool{}
	for i, t := range p.Targets {
		at := fmt.Sprintf("provides.targets[%d]", i)
		switch {
		case !isTargetKind(t):
			v.fail("targets.kind", at, "wait target kind %q is not lower-case letters, digits, - or _", t)
		case targets[t]:
			v.fail("targets.duplicate", at, "wait target kind %q is declared twice", t)
		}
		targets[t] = true
	}

	if p.EntryGated && (len(p.Operations) == 0 || len(p.Extensions) == 0) {
		v.fail("entry_gated.requires", "provides.entry_gated", "entry_gated needs operations to gate and an extension type whose entries gate them")
	}
	if p.EntryNamed && len(p.Extensions) == 0 {
		v.fail("entry_named.type", "provides.entry_named", "entry_named needs an extension type whose entries give the name")
	}

	toolsets := map[string]bool{}
	for i, t := range p.Toolsets {
		at := fmt.Sprintf("provides.toolsets[%d]", i)
		v.dotted(at+".name", "toolset", t.Name, toolsets)
		if len(t.Operations) == 0 {
			v.fail("toolsets.empty", at+".operations", "toolset %q grants no operation", t.Name)
		}
		granted := map[string]bool{}
		for j, o := range t.Operations {
			oat := fmt.Sprintf("%s.operations[%d]", at, j)
			switch {
			case granted[o.Name]:
				v.fail("toolsets.operation-duplicate", oat+".name", "toolset %q grants %q twice", t.Name, o.Name)
			case !operations[o.Name] && OwnsDotted("os", o.Name) && !IsBuiltinOperation(o.Name):
				v.fail("toolsets.operation", oat+".name", "%q is no builtin: the builtins are %s", o.Name, strings.Join(BuiltinOperations(), ", "))
			case !operations[o.Name] && !IsBuiltinOperation(o.Name):
				v.fail("toolsets.operation", oat+".name", "%q is neither an operation of the manifest nor a builtin", o.Name)
			}
			granted[o.Name] = true
			if o.Since < 0 {
				v.fail("toolsets.since", oat+".since", "since is negative")
			}
		}
	}

	v.executors()

	resources := map[string]bool{}
	for i, r := range p.Resources {
		at := fmt.Sprintf("provides.resources[%d]", i)
		v.ident(at+".type", "resource type", r.Type, resources)
		modes := map[string]bool{}
		for j, mode := range r.Modes {
			mat := fmt.Sprintf("%s.modes[%d]", at, j)
			switch {
			case mode != ResourceModeShared && mode != ResourceModeWork && mode != ResourceModeFresh:
				v.fail("resources.modes", mat, "mode %q is not shared, work or fresh", mode)
			case modes[mode]:
				v.fail("resources.modes", mat, "mode %q is listed twice", mode)
			}
			modes[mode] = true
		}
		settings := v.settings(at, r.Settings)
		v.fields(at, r.Fields, false, settings)
	}

	sandboxes := map[string]bool{}
	for i, s := range p.Sandboxes {
		v.ident(fmt.Sprintf("provides.sandboxes[%d].type", i), "sandbox type", s.Type, sandboxes)
	}
	containers := map[string]bool{}
	for i, c := range p.Containers {
		v.ident(fmt.Sprintf("provides.containers[%d].type", i), "container type", c.Type, containers)
	}

	tunnels := map[string]bool{}
	for i, t := range p.Tunnels {
		at := fmt.Sprintf("provides.tunnels[%d]", i)
		switch {
		case v.nameOK && !(IsIdentifier(t.Type) && strings.HasPrefix(t.Type, m.Name)):
			v.fail("tunnels.type", at+".type", "tunnel type %q is not %q or an identifier beginning with it", t.Type, m.Name)
		case tunnels[t.Type]:
			v.fail("names.duplicate", at+".type", "tunnel type %q is declared twice", t.Type)
		}
		tunnels[t.Type] = true
		v.fields(at, t.Fields, false, nil)
	}

	tasks := map[string]bool{}
	for i, t := range p.Tasks {
		at := fmt.Sprintf("provides.tasks[%d]", i)
		v.ident(at+".name", "task", t.Name, tasks)
		if d, err := time.ParseDuration(t.Interval); err != nil || d < time.Second {
			v.fail("tasks.interval", at+".interval", "interval %q is not a duration of at least 1s (such as \"30s\" or \"5m\")", t.Interval)
		}
	}

	checks := map[string]bool{}
	for i, c := range p.Checks {
		v.plain(fmt.Sprintf("provides.checks[%d].name", i), "check", c.Name, checks)
	}
	probes := map[string]bool{}
	for i, pr := range p.Probes {
		at := fmt.Sprintf("provides.probes[%d]", i)
		v.plain(at+".name", "probe", pr.Name, probes)
		args := map[string]bool{}
		for j, a := range pr.Args {
			if !isFieldName(a) || args[a] {
				v.fail("names.form", fmt.Sprintf("%s.args[%d]", at, j), "probe argument %q is not a distinct field name", a)
			}
			args[a] = true
		}
	}

	v.pages(types, kinds, handlers)

	schemas := map[string]bool{}
	for i, s := range p.Schemas {
		at := fmt.Sprintf("provides.schemas[%d]", i)
		switch {
		case !isDottedName(s.Base) || (v.nameOK && !OwnsDotted(m.Name, s.Base)):
			v.fail("schemas.base", at+".base", "schema base %q is not a dotted name beginning with %q", s.Base, m.Name+".")
		case hasVersionSuffix(s.Base):
			v.fail("schemas.base", at+".base", "schema base %q ends in a version; payloads add .v<N> themselves", s.Base)
		case schemas[s.Base]:
			v.fail("names.duplicate", at+".base", "schema base %q is declared twice", s.Base)
		}
		schemas[s.Base] = true
		if len(s.Versions) == 0 {
			v.fail("schemas.versions", at+".versions", "schema base %q lists no readable version", s.Base)
		}
		for j, ver := range s.Versions {
			if ver <= 0 || (j > 0 && ver <= s.Versions[j-1]) {
				v.fail("schemas.versions", fmt.Sprintf("%s.versions[%d]", at, j), "versions are positive and strictly increasing")
				break
			}
		}
	}

	if p.StartGate && !slices.Contains(m.Permissions, PermissionWorkStartGate) {
		v.fail("start_gate.permission", "provides.start_gate", "start_gate needs the %s permission", PermissionWorkStartGate)
	}
	if p.OperationGate && !slices.Contains(m.Permissions, PermissionOperationGate) {
		v.fail("operation_gate.permission", "provides.operation_gate", "operation_gate needs the %s permission", PermissionOperationGate)
	}
	if p.ConfigCandidate && !slices.Contains(m.Permissions, PermissionConfigRead) {
		v.fail("config_candidate.permission", "provides.config_candidate", "config_candidate needs the %s permission", PermissionConfigRead)
	}

	for i, dir := range p.Playbooks {
		if !insideDir(dir) {
			v.fail("playbooks.inside", fmt.Sprintf("provides.playbooks[%d]", i), "playbook directory %q is not a relative path inside the extension directory", dir)
		}
	}

	stores := map[string]bool{}
	for i, s := range p.ExternalStores {
		at := fmt.Sprintf("provides.external_stores[%d].connection", i)
		switch {
		case !connections[s.Connection]:
			v.fail("external_stores.connection", at, "%q is not a connection type of the manifest", s.Connection)
		case stores[s.Connection]:
			v.fail("names.duplicate", at, "external store %q is declared twice", s.Connection)
		}
		stores[s.Connection] = true
	}
}

// header checks the top-level fields.
func (v *validator) header() {
	m := v.m
	if !slices.ContainsFunc(m.Protocol, Supported) {
		v.fail("protocol.supported", "protocol", "the protocol list %v has no version this build speaks (%v)", m.Protocol, SupportedVersions())
	}
	switch {
	case !IsIdentifier(m.Name):
		v.fail("name.identifier", "name", "name %q is not an identifier (lower-case letters, digits, - and _, starting with a letter)", m.Name)
	case slices.Contains(ReservedNames(), m.Name):
		v.fail("name.reserved", "name", "name %q is reserved", m.Name)
	default:
		v.nameOK = true
	}
	if m.Title != "" && (!isOneLine(m.Title) || utf8.RuneCountInString(m.Title) > MaxTitleRunes) {
		v.fail("title.line", "title", "the title is one line of at most %d characters", MaxTitleRunes)
	}
	if m.Version == "" || !isOneLine(m.Version) || len(m.Version) > MaxVersionBytes {
		v.fail("version.line", "version", "the version is required, one line of at most %d bytes", MaxVersionBytes)
	}
	switch {
	case len(m.Command) == 0 || m.Command[0] == "":
		v.fail("command.required", "command", "the command is required: the program to start, relative to the extension directory")
	case !m.RunsOnHost() && !insideDir(m.Command[0]):
		v.fail("command.inside", "command[0]", "program %q is not a relative path inside the extension directory", m.Command[0])
	}
	seen := map[string]bool{}
	for i, perm := range m.Permissions {
		at := fmt.Sprintf("permissions[%d]", i)
		switch {
		case !slices.Contains(KnownPermissions(), perm):
			v.fail(RuleNewerPermission, at, "unknown permission %q: the manifest needs a newer Open Conduit", perm)
		case seen[perm]:
			v.fail("permissions.duplicate", at, "permission %q is asked for twice", perm)
		}
		seen[perm] = true
	}
	if m.KVVersion < 0 {
		v.fail("kv_version.negative", "kv_version", "kv_version %d is negative", m.KVVersion)
	}
}

func (v *validator) operation(at string, o OperationDecl, seen map[string]bool) {
	v.dotted(at+".name", "operation", o.Name, seen)
	if o.Kind != OperationKindHandler && o.Kind != OperationKindWait && o.Kind != OperationKindEmit {
		v.fail("operations.kind", at+".kind", "kind %q is not handler, wait or emit", o.Kind)
	}
	if o.Commit && o.Kind != OperationKindEmit {
		v.fail("operations.commit", at+".commit", "only an emit operation commits")
	}
	if o.Serves != "" {
		switch {
		case o.Kind != OperationKindHandler:
			v.fail("operations.serves", at+".serves", "only a handler operation serves a capability")
		case !isDottedName(o.Serves):
			v.fail("operations.serves", at+".serves", "capability %q is not named like an operation", o.Serves)
		}
	}
	if !isOneLine(o.Summary) || len(o.Summary) > MaxSummaryBytes {
		v.fail("operations.summary", at+".summary", "the summary is one line of at most %d bytes", MaxSummaryBytes)
	}
	if len(o.Guidance) > MaxGuidanceBytes {
		v.fail("operations.guidance", at+".guidance", "the guidance is %d bytes, over %d", len(o.Guidance), MaxGuidanceBytes)
	}
	if o.Input != nil {
		schema, ok := o.Input.(map[string]any)
		if !ok {
			v.fail("operations.input", at+".input", "the input schema is not a JSON object")
		} else if t, has := schema["type"]; has && t != "object" {
			v.fail("operations.input", at+".input.type", "the input schema describes an object (type object)")
		}
	}
	if o.DependencyFilter && o.Kind != OperationKindWait {
		v.fail("operations.dependency-filter", at+".dependency_filter", "only a wait operation has a dependency filter")
	}
}

func (v *validator) executors() {
	p := &v.m.Provides
	names := map[string]bool{}
	for i, x := range p.Executors {
		v.ident(fmt.Sprintf("provides.executors[%d].name", i), "executor", x.Name, names)
	}
	launch := map[string]bool{}
	for i, x := range p.Executors {
		at := fmt.Sprintf("provides.executors[%d]", i)
		switch x.Labels.Toolbelt {
		case "", ToolbeltNone, ToolbeltCLI, ToolbeltMCP, ToolbeltSDK:
		default:
			v.fail("executors.toolbelt", at+".labels.toolbelt", "toolbelt %q is not none, cli, mcp or sdk", x.Labels.Toolbelt)
		}
		if x.Pool != "" && x.Pool != PoolJobs {
			v.fail("executors.pool", at+".pool", "pool %q is not empty (agent turns) or %q", x.Pool, PoolJobs)
		}
		if len(x.LaunchNames) > 0 && !x.Controls.InteractiveLaunch {
			v.fail("launch_names.control", at+".launch_names", "launch names need the interactive_launch control")
		}
		for j, n := range x.LaunchNames {
			lat := fmt.Sprintf("%s.launch_names[%d]", at, j)
			switch {
			case !IsIdentifier(n):
				v.fail("launch_names.name", lat, "launch name %q is not an identifier", n)
			case names[n]:
				v.fail("launch_names.duplicate", lat, "launch name %q is an executor of the manifest", n)
			case launch[n]:
				v.fail("launch_names.duplicate", lat, "launch name %q is given twice", n)
			}
			launch[n] = true
		}
		v.fields(at, x.Fields, false, nil)
	}
}

func (v *validator) pages(types, kinds, handlers map[string]bool) {
	p := &v.m.Provides
	if len(p.Pages) > MaxPages {
		v.fail("pages.count", "provides.pages", "%d pages, over the limit of %d", len(p.Pages), MaxPages)
	}
	if len(p.Pages) > 0 && !p.Actions {
		v.fail("pages.actions", "provides.actions", "pages need actions: the page is drawn from the extension's actions")
	}
	ids := map[string]bool{}
	for i, pg := range p.Pages {
		at := fmt.Sprintf("provides.pages[%d]", i)
		v.ident(at+".id", "page", pg.ID, ids)
		if pg.Title == "" || !isOneLine(pg.Title) || utf8.RuneCountInString(pg.Title) > MaxTitleRunes {
			v.fail("pages.title", at+".title", "the title is required, one line of at most %d characters", MaxTitleRunes)
		}
		if !isOneLine(pg.Summary) || len(pg.Summary) > MaxSummaryBytes {
			v.fail("pages.summary", at+".summary", "the summary is one line of at most %d bytes", MaxSummaryBytes)
		}
		if !types[pg.Entry] {
			v.fail("pages.entry", at+".entry", "%q is not an extension type of the manifest", pg.Entry)
		}
		if !kinds[pg.WorkKind] {
			v.fail("pages.work_kind", at+".work_kind", "%q is not a work kind of the manifest", pg.WorkKind)
		}
		if pg.Route != "" && !handlers[pg.Route] {
			v.fail("pages.route", at+".route", "%q is not a route handler of the manifest", pg.Route)
		}
		if pg.Start == "" || !isOneLine(pg.Start) {
			v.fail("pages.start", at+".start", "the page names the action that starts a session")
		}
		compose := map[string]bool{}
		for j, c := range pg.Compose {
			if c == "" || !isOneLine(c) || compose[c] {
				v.fail("pages.compose", fmt.Sprintf("%s.compose[%d]", at, j), "compose actions are distinct one-line names")
			}
			compose[c] = true
		}
	}
}

// settings checks a type's settings and returns their defaults by field.
func (v *validator) settings(at string, settings []SettingDecl) map[string]any {
	out := map[string]any{}
	for j, s := range settings {
		sat := fmt.Sprintf("%s.settings[%d]", at, j)
		_, dup := out[s.Field]
		switch {
		case !isFieldName(s.Field):
			v.fail("settings.field", sat+".field", "%q is not a top-level field name", s.Field)
		case dup:
			v.fail("settings.field", sat+".field", "field %q is listed twice", s.Field)
		case credentialField(s.Field):
			v.fail("settings.credential", sat+".field", "%q can carry a credential, so it is never shown", s.Field)
		}
		out[s.Field] = nil
		switch s.Type {
		case SettingString, SettingBoolean, SettingNumber, SettingStrings:
			if s.Default != nil && !settingDefaultFits(s.Type, s.Default) {
				v.fail("settings.default", sat+".default", "the default is not a %s", s.Type)
			} else {
				out[s.Field] = s.Default
			}
		default:
			v.fail("settings.type", sat+".type", "type %q is not string, boolean, number or strings", s.Type)
		}
	}
	return out
}

// fields checks a type's field descriptions. Secret fields are allowed only
// on a connection type; settings are the type's settings defaults.
func (v *validator) fields(at string, fields []FieldDecl, connection bool, settings map[string]any) {
	type key struct {
		name   string
		secret bool
	}
	seen := map[key]bool{}
	for j, f := range fields {
		fat := fmt.Sprintf("%s.fields[%d]", at, j)
		k := key{f.Name, f.Secret}
		switch {
		case !isFieldName(f.Name):
			v.fail("fields.name", fat+".name", "%q is not a field name", f.Name)
		case seen[k]:
			v.fail("fields.name", fat+".name", "field %q is described twice", f.Name)
		}
		seen[k] = true
		if !isOneLine(f.Help) || len(f.Help) > MaxFieldHelpBytes {
			v.fail("fields.help", fat+".help", "the help is one line of at most %d bytes", MaxFieldHelpBytes)
		}
		if f.Required && f.Default != "" {
			v.fail("fields.required-default", fat+".default", "a required field takes no default")
		}
		options := map[string]bool{}
		for o, opt := range f.Options {
			if opt == "" || options[opt] {
				v.fail("fields.options", fmt.Sprintf("%s.options[%d]", fat, o), "options are distinct and non-empty")
			}
			options[opt] = true
		}
		if len(f.Options) > 0 && f.Default != "" && !options[f.Default] {
			v.fail("fields.options", fat+".options", "the options do not include the default %q", f.Default)
		}
		if f.Secret && !connection {
			v.fail("fields.secret", fat+".secret", "only a connection type has secret fields")
		}
		if d, ok := settings[f.Name]; ok && d != nil && f.Default != "" && !f.Secret && !defaultTextMatches(d, f.Default) {
			v.fail("fields.settings-default", fat+".default", "the default %q differs from the settings default", f.Default)
		}
	}
}

// ident checks an identifier-shaped name the extension owns.
func (v *validator) ident(at, what, name string, seen map[string]bool) {
	switch {
	case v.nameOK && !(IsIdentifier(name) && OwnsName(v.m.Name, name)):
		v.fail("names.identifier", at, "%s %q is not %q or an identifier beginning with %q", what, name, v.m.Name, v.m.Name+"-")
	case seen[name]:
		v.fail("names.duplicate", at, "%s %q is declared twice", what, name)
	}
	seen[name] = true
}

// dotted checks a dotted name the extension owns.
func (v *validator) dotted(at, what, name string, seen map[string]bool) {
	switch {
	case v.nameOK && !(isDottedName(name) && OwnsDotted(v.m.Name, name)):
		v.fail("names.dotted", at, "%s %q is not a dotted name beginning with %q", what, name, v.m.Name+".")
	case seen[name]:
		v.fail("names.duplicate", at, "%s %q is declared twice", what, name)
	}
	seen[name] = true
}

// plain checks a name that is an identifier the extension need not prefix.
func (v *validator) plain(at, what, name string, seen map[string]bool) {
	switch {
	case !IsIdentifier(name):
		v.fail("names.form", at, "%s %q is not an identifier", what, name)
	case seen[name]:
		v.fail("names.duplicate", at, "%s %q is declared twice", what, name)
	}
	seen[name] = true
}

// oneLine reports whether s is valid UTF-8 with no control characters and no
// line or paragraph separators.
func isOneLine(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return false
		}
	}
	return true
}

// isDottedName reports whether s is at most MaxDottedBytes of at least two
// segments joined by '.': an identifier, then segments of lower-case
// letters, digits, '-' and '_'.
func isDottedName(s string) bool {
	if len(s) > MaxDottedBytes {
		return false
	}
	segs := strings.Split(s, ".")
	if len(segs) < 2 || !IsIdentifier(segs[0]) {
		return false
	}
	for _, seg := range segs[1:] {
		if seg == "" {
			return false
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// hasVersionSuffix reports whether a dotted name ends in ".v<digits>".
func hasVersionSuffix(s string) bool {
	i := strings.LastIndex(s, ".v")
	if i < 0 || i+2 == len(s) {
		return false
	}
	for _, c := range s[i+2:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isTargetKind reports whether s is a wait target kind.
func isTargetKind(s string) bool {
	if s == "" || len(s) > MaxIdentifierBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// isFieldName reports whether s names a config field: 1 to 64 ASCII letters,
// digits, '_' and '-', starting with a letter or '_'.
func isFieldName(s string) bool {
	if s == "" || len(s) > MaxIdentifierBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '-')) {
			return false
		}
	}
	return true
}

// credentialField reports whether a field's name says it can carry a
// credential. Settings and describe are shown to operators, so they never
// name one.
func credentialField(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"secret", "token", "password", "passwd", "credential", "private_key", "api_key", "apikey"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// insideDir reports whether p is a slash-separated relative path that stays
// inside the directory it is resolved against.
func insideDir(p string) bool {
	if p == "" || strings.ContainsAny(p, "\\\x00") || strings.HasPrefix(p, "/") {
		return false
	}
	return filepath.IsLocal(filepath.FromSlash(p))
}

// settingDefaultFits reports whether d is a value of the setting type typ.
func settingDefaultFits(typ string, d any) bool {
	switch typ {
	case SettingString:
		_, ok := d.(string)
		return ok
	case SettingBoolean:
		_, ok := d.(bool)
		return ok
	case SettingNumber:
		_, ok := settingNumber(d)
		return ok
	case SettingStrings:
		_, ok := settingStrings(d)
		return ok
	}
	return false
}

func settingNumber(d any) (float64, bool) {
	switch n := d.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

func settingStrings(d any) ([]string, bool) {
	switch l := d.(type) {
	case []string:
		return l, true
	case []any:
		out := make([]string, len(l))
		for i, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out[i] = s
		}
		return out, true
	}
	return nil, false
}

// defaultTextMatches reports whether a field's default text says the same as
// a settings default: a string as itself, a boolean as true or false, a
// number as any literal of the same value, strings joined with ",".
func defaultTextMatches(d any, text string) bool {
	switch x := d.(type) {
	case string:
		return x == text
	case bool:
		return strconv.FormatBool(x) == text
	}
	if n, ok := settingNumber(d); ok {
		f, err := strconv.ParseFloat(text, 64)
		return err == nil && f == n
	}
	if l, ok := settingStrings(d); ok {
		return strings.Join(l, ",") == text
	}
	return true // a default of no setting type is refused by settings.default
}
