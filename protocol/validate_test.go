package protocol_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

// fullManifest declares one or more of every surface and validates. The
// rejection cases each break one rule of it.
func fullManifest() *protocol.Manifest {
	return &protocol.Manifest{
		Name:     "demo",
		Title:    "Demo",
		Version:  "1.0.0",
		Command:  []string{"bin/demo"},
		Protocol: []protocol.Version{protocol.Version1},
		Provides: protocol.Provides{
			Extensions: []protocol.ExtensionDecl{{
				Type:     "demo",
				Ingress:  true,
				Webhooks: true,
				Families: []protocol.FamilyDecl{
					{Name: "demo.message", Loss: "a message sent while the daemon was down"},
					{Name: "demo.item", Rederivable: true},
				},
				Settings: []protocol.SettingDecl{
					{Field: "team", Type: protocol.SettingString},
					{Field: "manage", Type: protocol.SettingBoolean, Default: true},
				},
				Describe: &protocol.DescribeDecl{List: "jobs", Name: "name", Detail: "schedule"},
				Fields: []protocol.FieldDecl{
					{Name: "team", Help: "the team", Required: true},
					{Name: "manage", Default: "true", Options: []string{"true", "false"}},
				},
			}},
			Connections: []protocol.ConnectionDecl{{
				Type: "demo",
				Fields: []protocol.FieldDecl{
					{Name: "url", Default: "https://demo.example"},
					{Name: "token", Required: true, Secret: true},
				},
			}},
			Routes:      []protocol.RouteDecl{{Handler: "demo", Samples: true, Binding: true, Display: true}},
			WorkKinds:   []protocol.WorkKindDecl{{Name: "demo-job", Standing: true, Trigger: true}},
			Recurrences: []protocol.RecurrenceDecl{{Name: "demo-cron"}},
			Operations: []protocol.OperationDecl{
				{Name: "demo.read", Kind: protocol.OperationKindHandler, Summary: "Read.", Serves: "notes.read",
					Input: map[string]any{"type": "object"}},
				{Name: "demo.await", Kind: protocol.OperationKindWait, DependencyFilter: true},
				{Name: "demo.publish", Kind: protocol.OperationKindEmit, Commit: true},
			},
			Targets:  []string{"job"},
			Toolsets: []protocol.ToolsetDecl{{Name: "demo.agent", Operations: []protocol.ToolsetOperation{{Name: "demo.read"}, {Name: "os.wait", Since: 2}}}},
			Executors: []protocol.ExecutorDecl{
				{
					Name:        "demo",
					Labels:      protocol.ExecutorLabels{Interrupt: true, Inject: true, Resume: true, Workspace: true, Toolbelt: protocol.ToolbeltMCP},
					Controls:    protocol.ExecutorControls{Stop: true, Forget: true, Attach: true, ContainerAttach: true, Live: true, InteractiveLaunch: true},
					LaunchNames: []string{"dm"},
					Sandbox:     true,
					Container:   true,
				},
				{Name: "demo-jobs", Pool: protocol.PoolJobs},
			},
			Resources: []protocol.ResourceDecl{{
				Type: "demo-dir", Modes: []string{"shared", "work"}, Sweep: true,
				Settings: []protocol.SettingDecl{{Field: "root", Type: protocol.SettingString, Default: "ws"}},
				Fields:   []protocol.FieldDecl{{Name: "root", Default: "ws"}},
			}},
			Sandboxes:  []protocol.SandboxDecl{{Type: "demo-box"}},
			Containers: []protocol.ContainerDecl{{Type: "demo-pod", Forward: true}},
			Tunnels:    []protocol.TunnelDecl{{Type: "demo-relay", Fields: []protocol.FieldDecl{{Name: "region"}}}},
			Tasks:      []protocol.TaskDecl{{Name: "demo-sync", Interval: "30s"}},
			Checks:     []protocol.CheckDecl{{Name: "health", Offline: true}},
			Probes:     []protocol.ProbeDecl{{Name: "status", Args: []string{"verbose"}}},
			Pages: []protocol.PageDecl{{
				ID: "demo", Title: "Demo", Entry: "demo", WorkKind: "demo-job", Start: "start", Compose: []string{"say"},
			}},
			Schemas:           []protocol.SchemaDecl{{Base: "demo.message", Versions: []int{1, 2}}},
			EntryGated:        true,
			EntryNamed:        true,
			SegmentEnd:        true,
			StartGate:         true,
			OperationGate:     true,
			ConfigCandidate:   true,
			Actions:           true,
			Panels:            true,
			RunEnvironment:    true,
			Annotations:       true,
			TelemetryExporter: true,
			Setup:             true,
			Playbooks:         []string{"playbooks"},
			ExternalStores:    []protocol.ExternalStoreDecl{{Connection: "demo"}},
		},
		Permissions: protocol.KnownPermissions(),
		KVVersion:   3,
	}
}

// minimalManifest is the smallest valid manifest.
func minimalManifest() *protocol.Manifest {
	return &protocol.Manifest{Name: "demo", Version: "1", Command: []string{"demo"}, Protocol: []protocol.Version{1}}
}

const minimalJSON = `{"name":"demo","version":"1","command":["demo"],"protocol":[1],"provides":{}}`

// withMinimal returns minimalJSON with extra members added at the top level.
func withMinimal(extra string) string {
	return strings.TrimSuffix(minimalJSON, "}") + "," + extra + "}"
}

func TestFullManifestIsValid(t *testing.T) {
	require.NoError(t, fullManifest().Validate())
	require.NoError(t, minimalManifest().Validate())
	m, err := protocol.ParseManifest([]byte(minimalJSON))
	require.NoError(t, err)
	assert.Equal(t, minimalManifest(), m)

	// Escapes of a whole surrogate pair are one character; an escaped
	// backslash before "u" is no escape.
	m, err = protocol.ParseManifest([]byte(withMinimal(`"title":"\ud83d\ude00 \\ud800 \u00e9"`)))
	require.NoError(t, err)
	assert.Equal(t, "😀 \\ud800 é", m.Title)
}

type rejection struct {
	rule string
	name string // tells cases of one rule apart
	path string
	// Either doc, a whole manifest, or mutate, a change to fullManifest.
	doc    string
	mutate func(m *protocol.Manifest)
	// files, when set, lays fullManifest (after mutate) out as a package
	// on disk, read with LoadManifest: each entry is a path in the package
	// and a file's text, or "-> target" for a symbolic link, where
	// $OUTSIDE names a directory outside the package that holds the files
	// demo and bin/demo.
	files map[string]string
	// pos, when set, is where a strict reader's refusal points: "line:column".
	pos string
}

func deep(n int) (doc, path string) {
	return withMinimal(`"x":` + strings.Repeat(`{"a":`, n) + `1` + strings.Repeat("}", n)), "x" + strings.Repeat(".a", protocol.MaxManifestDepth-1)
}

var depthDoc, depthPath = deep(protocol.MaxManifestDepth + 5)

var rejections = []rejection{
	// The strict reader.
	{rule: "json.size", pos: "1:1048577", doc: strings.Repeat(" ", protocol.MaxManifestBytes) + minimalJSON},
	{rule: "json.utf8", pos: "1:12", doc: `{"name":"de` + "\xff" + `mo"}`},
	{rule: "json.syntax", path: "version", pos: "1:26", doc: `{"name":"demo","version":}`},
	{rule: "json.syntax", name: "truncated", path: "provides.routes[0]", pos: "1:55", doc: `{"name":"demo","provides":{"routes":[{"handler":"demo"`},
	{rule: "json.syntax", name: "NaN", path: "kv_version", pos: "1:91", doc: withMinimal(`"kv_version":NaN`)},
	{rule: "json.trailing", pos: "1:78", doc: minimalJSON + `{}`},
	{rule: "json.trailing", name: "next line", pos: "2:3", doc: minimalJSON + "\n  {}"},
	{rule: "json.trailing", name: "garbage", pos: "1:79", doc: minimalJSON + ` x`},
	{rule: "json.depth", path: depthPath, doc: depthDoc},
	{rule: "json.duplicate-key", path: "name", pos: "1:16", doc: `{"name":"demo","name":"demo"}`},
	{rule: "json.duplicate-key", name: "nested", path: "provides.routes[0].handler", doc: `{"provides":{"routes":[{"handler":"demo","handler":"demo"}]}}`},
	{rule: "json.number", path: "kv_version", pos: "1:91", doc: withMinimal(`"kv_version":1e400`)},
	{rule: "json.number", name: "integer overflow", path: "kv_version", doc: withMinimal(`"kv_version":99999999999999999999`)},
	{rule: "json.number", name: "in a schema", path: "provides.operations[0].input.maximum", doc: `{"provides":{"operations":[{"input":{"maximum":-1e999}}]}}`},
	{rule: "json.type", path: "name", doc: `{"name":5}`},
	{rule: "json.type", name: "on a later line", path: "name", pos: "3:11", doc: "{\n  \"version\": \"1\",\n  \"name\": 5\n}"},
	{rule: "json.syntax", name: "byte order mark", pos: "1:1", doc: "\xef\xbb\xbf" + minimalJSON},
	{rule: "json.utf8", name: "unpaired surrogate escape", pos: "1:10", doc: `{"name":"\ud800"}`},
	{rule: "json.utf8", name: "reversed surrogate escapes", pos: "1:14", doc: `{"name":"demo\udc00\ud800"}`},
	{rule: "json.utf8", name: "after a line", pos: "2:4", doc: "{\"name\":\n\"de\xffmo\"}"},
	{rule: "json.type", name: "null", path: "version", doc: `{"version":null}`},
	{rule: "json.type", name: "fraction", path: "kv_version", doc: withMinimal(`"kv_version":1.5`)},
	{rule: "json.type", name: "not an object", pos: "1:1", doc: `["demo"]`},
	{rule: "json.type", name: "label value", path: "provides.executors[0].labels.resume", doc: `{"provides":{"executors":[{"labels":{"resume":"yes"}}]}}`},
	{rule: "newer.field", path: "provides.gadgets", doc: `{"name":"demo","provides":{"gadgets":[]}}`},
	{rule: "newer.field", name: "case", path: "Name", doc: `{"Name":"demo"}`},
	{rule: "newer.field", name: "control", path: "provides.executors[0].controls.teleport", doc: `{"provides":{"executors":[{"controls":{"teleport":true}}]}}`},
	{rule: "newer.storage", path: "provides.storage", doc: `{"name":"demo","provides":{"storage":{"kind":"sql"}}}`},
	{rule: "newer.storage", name: "top level", path: "storage", doc: withMinimal(`"storage":true`)},
	{rule: "newer.executor-label", path: "provides.executors[0].labels.good_at_go", doc: `{"provides":{"executors":[{"name":"demo","labels":{"good_at_go":true}}]}}`},
	{rule: "newer.permission", path: "permissions[1]", mutate: func(m *protocol.Manifest) {
		*m = *minimalManifest()
		m.Permissions = []string{"probes", "camera"}
	}},

	// The header.
	{rule: "protocol.supported", path: "protocol", mutate: func(m *protocol.Manifest) { m.Protocol = []protocol.Version{99} }},
	{rule: "protocol.supported", name: "empty", path: "protocol", mutate: func(m *protocol.Manifest) { m.Protocol = nil }},
	{rule: "name.identifier", path: "name", mutate: func(m *protocol.Manifest) { m.Name = "Demo" }},
	{rule: "name.reserved", path: "name", mutate: func(m *protocol.Manifest) { m.Name = "os" }},
	{rule: "title.line", path: "title", mutate: func(m *protocol.Manifest) { m.Title = "two\nlines" }},
	{rule: "title.line", name: "long", path: "title", mutate: func(m *protocol.Manifest) { m.Title = strings.Repeat("é", protocol.MaxTitleRunes+1) }},
	{rule: "version.line", path: "version", mutate: func(m *protocol.Manifest) { m.Version = "" }},
	{rule: "command.required", path: "command", mutate: func(m *protocol.Manifest) { m.Command = nil }},
	{rule: "command.inside", path: "command[0]", mutate: func(m *protocol.Manifest) { m.Command = []string{"../demo"} }},
	{rule: "command.inside", name: "absolute", path: "command[0]", mutate: func(m *protocol.Manifest) { m.Command = []string{"/usr/bin/demo"} }},
	{rule: "command.inside", name: "backslash", path: "command[0]", mutate: func(m *protocol.Manifest) { m.Command = []string{`bin\demo`} }},
	{rule: "permissions.duplicate", path: "permissions[1]", mutate: func(m *protocol.Manifest) {
		*m = *minimalManifest()
		m.Permissions = []string{"probes", "probes"}
	}},
	{rule: "kv_version.negative", path: "kv_version", mutate: func(m *protocol.Manifest) { m.KVVersion = -1 }},

	// Names.
	{rule: "names.identifier", path: "provides.executors[1].name", mutate: func(m *protocol.Manifest) { m.Provides.Executors[1].Name = "other" }},
	{rule: "names.identifier", name: "work kind", path: "provides.work_kinds[0].name", mutate: func(m *protocol.Manifest) {
		m.Provides.WorkKinds[0].Name = "demojob"
		m.Provides.Pages[0].WorkKind = "demojob"
	}},
	{rule: "names.dotted", path: "provides.extensions[0].families[1].name", mutate: func(m *protocol.Manifest) { m.Provides.Extensions[0].Families[1].Name = "other.item" }},
	{rule: "names.dotted", name: "bare name", path: "provides.toolsets[0].name", mutate: func(m *protocol.Manifest) { m.Provides.Toolsets[0].Name = "demo" }},
	{rule: "names.form", path: "provides.checks[0].name", mutate: func(m *protocol.Manifest) { m.Provides.Checks[0].Name = "Health Check" }},
	{rule: "names.form", name: "probe argument", path: "provides.probes[0].args[1]", mutate: func(m *protocol.Manifest) { m.Provides.Probes[0].Args = []string{"verbose", "verbose"} }},
	{rule: "names.duplicate", path: "provides.routes[1].handler", mutate: func(m *protocol.Manifest) {
		m.Provides.Routes = append(m.Provides.Routes, protocol.RouteDecl{Handler: "demo"})
	}},
	{rule: "names.duplicate", name: "schema", path: "provides.schemas[1].base", mutate: func(m *protocol.Manifest) {
		m.Provides.Schemas = append(m.Provides.Schemas, protocol.SchemaDecl{Base: "demo.message", Versions: []int{1}})
	}},

	// Surfaces.
	{rule: "families.loss", path: "provides.extensions[0].families[0].loss", mutate: func(m *protocol.Manifest) { m.Provides.Extensions[0].Families[0].Loss = "" }},
	{rule: "families.loss", name: "rederivable", path: "provides.extensions[0].families[1].loss", mutate: func(m *protocol.Manifest) { m.Provides.Extensions[0].Families[1].Loss = "everything" }},
	{rule: "extensions.ingress-families", path: "provides.extensions[0].families", mutate: func(m *protocol.Manifest) { m.Provides.Extensions[0].Families = nil }},
	{rule: "extensions.webhooks-ingress", path: "provides.extensions[0].webhooks", mutate: func(m *protocol.Manifest) { m.Provides.Extensions[0].Ingress = false }},
	{rule: "work_kinds.route", path: "provides.work_kinds", mutate: func(m *protocol.Manifest) { m.Provides.Routes = nil }},
	{rule: "operations.kind", path: "provides.operations[0].kind", mutate: func(m *protocol.Manifest) {
		m.Provides.Operations[0].Kind = "query"
		m.Provides.Operations[0].Serves = ""
	}},
	{rule: "operations.commit", path: "provides.operations[0].commit", mutate: func(m *protocol.Manifest) { m.Provides.Operations[0].Commit = true }},
	{rule: "operations.serves", path: "provides.operations[1].serves", mutate: func(m *protocol.Manifest) { m.Provides.Operations[1].Serves = "notes.read" }},
	{rule: "operations.serves", name: "name", path: "provides.operations[0].serves", mutate: func(m *protocol.Manifest) { m.Provides.Operations[0].Serves = "read" }},
	{rule: "operations.summary", path: "provides.operations[0].summary", mutate: func(m *protocol.Manifest) {
		m.Provides.Operations[0].Summary = strings.Repeat("x", protocol.MaxSummaryBytes+1)
	}},
	{rule: "operations.summary", name: "newline", path: "provides.operations[0].summary", mutate: func(m *protocol.Manifest) { m.Provides.Operations[0].Summary = "Read.\nThen more." }},
	{rule: "operations.guidance", path: "provides.operations[0].guidance", mutate: func(m *protocol.Manifest) {
		m.Provides.Operations[0].Guidance = strings.Repeat("x", protocol.MaxGuidanceBytes+1)
	}},
	{rule: "operations.input", path: "provides.operations[0].input", mutate: func(m *protocol.Manifest) { m.Provides.Operations[0].Input = []any{"a"} }},
	{rule: "operations.input", name: "type", path: "provides.operations[0].input.type", mutate: func(m *protocol.Manifest) {
		m.Provides.Operations[0].Input = map[string]any{"type": "array"}
	}},
	{rule: "operations.dependency-filter", path: "provides.operations[2].dependency_filter", mutate: func(m *protocol.Manifest) { m.Provides.Operations[2].DependencyFilter = true }},
	{rule: "targets.kind", path: "provides.targets[0]", mutate: func(m *protocol.Manifest) { m.Provides.Targets = []string{"Job:"} }},
	{rule: "targets.duplicate", path: "provides.targets[1]", mutate: func(m *protocol.Manifest) { m.Provides.Targets = []string{"job", "job"} }},
	{rule: "entry_gated.requires", path: "provides.entry_gated", mutate: func(m *protocol.Manifest) {
		*m = *minimalManifest()
		m.Provides.EntryGated = true
	}},
	{rule: "entry_named.type", path: "provides.entry_named", mutate: func(m *protocol.Manifest) {
		*m = *minimalManifest()
		m.Provides.EntryNamed = true
	}},
	{rule: "toolsets.empty", path: "provides.toolsets[0].operations", mutate: func(m *protocol.Manifest) { m.Provides.Toolsets[0].Operations = nil }},
	{rule: "toolsets.operation", path: "provides.toolsets[0].operations[1].name", mutate: func(m *protocol.Manifest) { m.Provides.Toolsets[0].Operations[1].Name = "demo.write" }},
	{rule: "toolsets.operation", name: "unknown builtin", path: "provides.toolsets[0].operations[1].name", mutate: func(m *protocol.Manifest) { m.Provides.Toolsets[0].Operations[1].Name = "os.shell" }},
	{rule: "toolsets.operation-duplicate", path: "provides.toolsets[0].operations[1].name", mutate: func(m *protocol.Manifest) { m.Provides.Toolsets[0].Operations[1].Name = "demo.read" }},
	{rule: "toolsets.since", path: "provides.toolsets[0].operations[0].since", mutate: func(m *protocol.Manifest) { m.Provides.Toolsets[0].Operations[0].Since = -1 }},
	{rule: "executors.toolbelt", path: "provides.executors[0].labels.toolbelt", mutate: func(m *protocol.Manifest) { m.Provides.Executors[0].Labels.Toolbelt = "grpc" }},
	{rule: "executors.pool", path: "provides.executors[1].pool", mutate: func(m *protocol.Manifest) { m.Provides.Executors[1].Pool = "gpu" }},
	{rule: "launch_names.control", path: "provides.executors[1].launch_names", mutate: func(m *protocol.Manifest) { m.Provides.Executors[1].LaunchNames = []string{"dj"} }},
	{rule: "launch_names.name", path: "provides.executors[0].launch_names[0]", mutate: func(m *protocol.Manifest) { m.Provides.Executors[0].LaunchNames = []string{"Dm"} }},
	{rule: "launch_names.duplicate", path: "provides.executors[0].launch_names[1]", mutate: func(m *protocol.Manifest) { m.Provides.Executors[0].LaunchNames = []string{"dm", "demo-jobs"} }},
	{rule: "launch_names.duplicate", name: "repeated", path: "provides.executors[0].launch_names[1]", mutate: func(m *protocol.Manifest) { m.Provides.Executors[0].LaunchNames = []string{"dm", "dm"} }},
	{rule: "resources.modes", path: "provides.resources[0].modes[1]", mutate: func(m *protocol.Manifest) { m.Provides.Resources[0].Modes = []string{"work", "ephemeral"} }},
	{rule: "resources.modes", name: "repeated", path: "provides.resources[0].modes[1]", mutate: func(m *protocol.Manifest) { m.Provides.Resources[0].Modes = []string{"work", "work"} }},
	{rule: "tunnels.type", path: "provides.tunnels[0].type", mutate: func(m *protocol.Manifest) { m.Provides.Tunnels[0].Type = "relay" }},
	{rule: "tasks.interval", path: "provides.tasks[0].interval", mutate: func(m *protocol.Manifest) { m.Provides.Tasks[0].Interval = "500ms" }},
	{rule: "tasks.interval", name: "not a duration", path: "provides.tasks[0].interval", mutate: func(m *protocol.Manifest) { m.Provides.Tasks[0].Interval = "hourly" }},
	{rule: "playbooks.inside", path: "provides.playbooks[0]", mutate: func(m *protocol.Manifest) { m.Provides.Playbooks = []string{"../shared"} }},

	// Links out of the package, found only on disk.
	{rule: "command.symlink", path: "command[0]", files: map[string]string{"bin/demo": "-> $OUTSIDE/demo"}},
	{rule: "command.symlink", name: "directory on the path", path: "command[0]", files: map[string]string{"bin": "-> $OUTSIDE/bin"}},
	{rule: "command.symlink", name: "dangling", path: "command[0]", files: map[string]string{"bin/demo": "-> $OUTSIDE/missing/demo"}},
	{rule: "command.symlink", name: "relative", path: "command[0]", files: map[string]string{"bin": "-> .."},
		mutate: func(m *protocol.Manifest) { m.Command = []string{"bin/real/demo"} }},
	{rule: "command.symlink", name: "through a link loop", path: "command[0]", files: map[string]string{"bin": "-> loop", "loop": "-> bin"}},
	{rule: "playbooks.symlink", path: "provides.playbooks[0]", files: map[string]string{"playbooks": "-> $OUTSIDE"}},
	{rule: "playbooks.symlink", name: "entry inside", path: "provides.playbooks[0]", files: map[string]string{"playbooks/a.md": "# A", "playbooks/deep/keys": "-> $OUTSIDE/demo"}},
	{rule: "external_stores.connection", path: "provides.external_stores[0].connection", mutate: func(m *protocol.Manifest) { m.Provides.ExternalStores[0].Connection = "warehouse" }},

	// Settings, describe and fields.
	{rule: "settings.field", path: "provides.extensions[0].settings[0].field", mutate: func(m *protocol.Manifest) { m.Provides.Extensions[0].Settings[0].Field = "a.b" }},
	{rule: "settings.field", name: "repeated", path: "provides.extensions[0].settings[1].field", mutate: func(m *protocol.Manifest) {
		m.Provides.Extensions[0].Settings[1] = protocol.SettingDecl{Field: "team", Type: protocol.SettingString}
	}},
	{rule: "settings.type", path: "provides.resources[0].settings[0].type", mutate: func(m *protocol.Manifest) { m.Provides.Resources[0].Settings[0].Type = "path" }},
	{rule: "settings.default", path: "provides.extensions[0].settings[1].default", mutate: func(m *protocol.Manifest) { m.Provides.Extensions[0].Settings[1].Default = "yes" }},
	{rule: "settings.credential", path: "provides.extensions[0].settings[0].field", mutate: func(m *protocol.Manifest) {
		m.Provides.Extensions[0].Settings[0].Field = "api_token"
	}},
	{rule: "settings.credential", name: "describe", path: "provides.extensions[0].describe.detail", mutate: func(m *protocol.Manifest) {
		m.Provides.Extensions[0].Describe.Detail = "password"
	}},
	{rule: "describe.fields", path: "provides.extensions[0].describe.name", mutate: func(m *protocol.Manifest) { m.Provides.Extensions[0].Describe.Name = "" }},
	{rule: "fields.name", path: "provides.routes[0].fields[0].name", mutate: func(m *protocol.Manifest) { m.Provides.Routes[0].Fields = []protocol.FieldDecl{{Name: ""}} }},
	{rule: "fields.name", name: "repeated", path: "provides.connections[0].fields[3].name", mutate: func(m *protocol.Manifest) {
		// A secret key may share a config field's name, but not another config field's.
		m.Provides.Connections[0].Fields = append(m.Provides.Connections[0].Fields,
			protocol.FieldDecl{Name: "url", Secret: true}, protocol.FieldDecl{Name: "url"})
	}},
	{rule: "fields.help", path: "provides.executors[0].fields[0].help", mutate: func(m *protocol.Manifest) {
		m.Provides.Executors[0].Fields = []protocol.FieldDecl{{Name: "program", Help: strings.Repeat("h", protocol.MaxFieldHelpBytes+1)}}
	}},
	{rule: "fields.required-default", path: "provides.connections[0].fields[0].default", mutate: func(m *protocol.Manifest) { m.Provides.Connections[0].Fields[0].Required = true }},
	{rule: "fields.options", path: "provides.extensions[0].fields[1].options", mutate: func(m *protocol.Manifest) { m.Provides.Extensions[0].Fields[1].Options = []string{"yes", "no"} }},
	{rule: "fields.options", name: "repeated", path: "provides.tunnels[0].fields[0].options[1]", mutate: func(m *protocol.Manifest) { m.Provides.Tunnels[0].Fields[0].Options = []string{"eu", "eu"} }},
	{rule: "fields.secret", path: "provides.extensions[0].fields[0].secret", mutate: func(m *protocol.Manifest) { m.Provides.Extensions[0].Fields[0].Secret = true }},
	{rule: "fields.settings-default", path: "provides.resources[0].fields[0].default", mutate: func(m *protocol.Manifest) { m.Provides.Resources[0].Fields[0].Default = "elsewhere" }},

	// Permissions that surfaces need.
	{rule: "start_gate.permission", path: "provides.start_gate", mutate: func(m *protocol.Manifest) {
		m.Permissions = withoutPermission(m.Permissions, protocol.PermissionWorkStartGate)
	}},
	{rule: "operation_gate.permission", path: "provides.operation_gate", mutate: func(m *protocol.Manifest) {
		m.Permissions = withoutPermission(m.Permissions, protocol.PermissionOperationGate)
	}},
	{rule: "config_candidate.permission", path: "provides.config_candidate", mutate: func(m *protocol.Manifest) {
		m.Permissions = withoutPermission(m.Permissions, protocol.PermissionConfigRead)
	}},

	// Pages.
	{rule: "pages.count", path: "provides.pages", mutate: func(m *protocol.Manifest) {
		for _, id := range []string{"demo-a", "demo-b", "demo-c", "demo-d"} {
			pg := m.Provides.Pages[0]
			pg.ID = id
			m.Provides.Pages = append(m.Provides.Pages, pg)
		}
	}},
	{rule: "pages.title", path: "provides.pages[0].title", mutate: func(m *protocol.Manifest) { m.Provides.Pages[0].Title = "" }},
	{rule: "pages.summary", path: "provides.pages[0].summary", mutate: func(m *protocol.Manifest) { m.Provides.Pages[0].Summary = "a\tb" }},
	{rule: "pages.entry", path: "provides.pages[0].entry", mutate: func(m *protocol.Manifest) { m.Provides.Pages[0].Entry = "demo-other" }},
	{rule: "pages.work_kind", path: "provides.pages[0].work_kind", mutate: func(m *protocol.Manifest) { m.Provides.Pages[0].WorkKind = "" }},
	{rule: "pages.route", path: "provides.pages[0].route", mutate: func(m *protocol.Manifest) { m.Provides.Pages[0].Route = "demo-other" }},
	{rule: "pages.start", path: "provides.pages[0].start", mutate: func(m *protocol.Manifest) { m.Provides.Pages[0].Start = "" }},
	{rule: "pages.compose", path: "provides.pages[0].compose[1]", mutate: func(m *protocol.Manifest) { m.Provides.Pages[0].Compose = []string{"say", "say"} }},
	{rule: "pages.actions", path: "provides.actions", mutate: func(m *protocol.Manifest) { m.Provides.Actions = false }},

	// Schemas.
	{rule: "schemas.base", path: "provides.schemas[0].base", mutate: func(m *protocol.Manifest) { m.Provides.Schemas[0].Base = "other.message" }},
	{rule: "schemas.base", name: "version suffix", path: "provides.schemas[0].base", mutate: func(m *protocol.Manifest) { m.Provides.Schemas[0].Base = "demo.message.v2" }},
	{rule: "schemas.versions", path: "provides.schemas[0].versions[1]", mutate: func(m *protocol.Manifest) { m.Provides.Schemas[0].Versions = []int{2, 2} }},
	{rule: "schemas.versions", name: "none", path: "provides.schemas[0].versions", mutate: func(m *protocol.Manifest) { m.Provides.Schemas[0].Versions = nil }},
	{rule: "schemas.versions", name: "zero", path: "provides.schemas[0].versions[0]", mutate: func(m *protocol.Manifest) { m.Provides.Schemas[0].Versions = []int{0, 1} }},
}

// layOut writes m into a new package directory with files (see
// rejection.files) and returns the directory.
func layOut(t *testing.T, m *protocol.Manifest, files map[string]string) string {
	t.Helper()
	dir, outside := t.TempDir(), t.TempDir()
	for _, name := range []string{"demo", "bin/demo"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(outside, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(outside, name), []byte("#!/bin/sh\n"), 0o755))
	}
	for name, text := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		if target, ok := strings.CutPrefix(text, "-> "); ok {
			require.NoError(t, os.Symlink(strings.ReplaceAll(target, "$OUTSIDE", outside), path))
			continue
		}
		require.NoError(t, os.WriteFile(path, []byte(text), 0o755))
	}
	data, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, protocol.ManifestFile), data, 0o644))
	return dir
}

func withoutPermission(perms []string, p string) []string {
	return slices.DeleteFunc(slices.Clone(perms), func(x string) bool { return x == p })
}

// TestManifestRejections breaks each rule once (or more) and checks the
// refusal names exactly that rule and path.
func TestManifestRejections(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range rejections {
		covered[c.rule] = true
		name := c.rule
		if c.name != "" {
			name += "(" + c.name + ")"
		}
		t.Run(name, func(t *testing.T) {
			var errs []error
			if c.files != nil {
				m := fullManifest()
				if c.mutate != nil {
					c.mutate(m)
				}
				require.NoError(t, m.Validate(), "the manifest alone is valid: only its package breaks the rule")
				_, err := protocol.LoadManifest(layOut(t, m, c.files))
				errs = append(errs, err)
			} else if c.mutate == nil {
				_, err := protocol.ParseManifest([]byte(c.doc))
				errs = append(errs, err)
			} else {
				m := fullManifest()
				c.mutate(m)
				errs = append(errs, m.Validate())
				// The same manifest read from its JSON is refused alike.
				data, err := json.Marshal(m)
				require.NoError(t, err)
				_, err = protocol.ParseManifest(data)
				errs = append(errs, err)
			}
			for _, err := range errs {
				require.Error(t, err)
				got := protocol.ManifestErrors(err)
				require.Len(t, got, 1, "refusals: %v", err)
				assert.Equal(t, c.rule, got[0].Rule, "%v", err)
				assert.Equal(t, c.path, got[0].Path, "%v", err)
				assert.NotEmpty(t, got[0].Message)
				newer := strings.HasPrefix(c.rule, "newer.")
				assert.Equal(t, newer, errors.Is(err, protocol.ErrNewerManifest))
				assert.Equal(t, !newer, errors.Is(err, protocol.ErrInvalidManifest))
				assert.Equal(t, !newer, errors.Is(err, protocol.ErrInvalid))
				assert.Contains(t, err.Error(), c.rule)
				if c.pos != "" {
					assert.Equal(t, c.pos, fmt.Sprintf("%d:%d", got[0].Line, got[0].Column), "%v", err)
				}
			}
		})
	}
	for _, r := range protocol.ManifestRules() {
		assert.True(t, covered[r.ID], "rule %s has no rejection case", r.ID)
	}
}

func TestManifestRulesAreListedOnce(t *testing.T) {
	ids := map[string]bool{}
	for _, r := range protocol.ManifestRules() {
		assert.False(t, ids[r.ID], "rule %s listed twice", r.ID)
		ids[r.ID] = true
		assert.Regexp(t, `^[a-z_]+(\.[a-z0-9_-]+)+$`, r.ID)
		assert.NotEmpty(t, r.Summary, r.ID)
	}
	for _, c := range rejections {
		assert.True(t, ids[c.rule], "case names unlisted rule %s", c.rule)
	}
}

// TestValidateRefusalsArePlaced: the refusals of a manifest read from its
// text point at the offending value's line and column, as the strict
// reader's do; a path the document does not hold stays unplaced.
func TestValidateRefusalsArePlaced(t *testing.T) {
	doc := "{\n  \"name\": \"os\",\n  \"version\": \"1\",\n  \"command\": [\"../x\"],\n" +
		"  \"protocol\": [1],\n  \"provides\": {\"work_kinds\": [{\"name\": \"os\"}]}\n}"
	_, err := protocol.ParseManifest([]byte(doc))
	var got []string
	for _, e := range protocol.ManifestErrors(err) {
		got = append(got, fmt.Sprintf("%s %s %d:%d", e.Rule, e.Path, e.Line, e.Column))
	}
	assert.Equal(t, []string{
		"name.reserved name 2:11",
		"command.inside command[0] 4:15",
		"work_kinds.route provides.work_kinds 6:30",
	}, got)
	assert.Contains(t, err.Error(), "manifest: name (line 2, column 11): ")

	m := fullManifest()
	m.Version = ""
	assert.Zero(t, protocol.ManifestErrors(m.Validate())[0].Line, "a decoded manifest has no text to point into")
}

func TestValidateReportsEveryRefusal(t *testing.T) {
	m := fullManifest()
	m.Version = ""
	m.KVVersion = -2
	m.Provides.Operations[1].Commit = true
	got := protocol.ManifestErrors(m.Validate())
	var rules []string
	for _, e := range got {
		rules = append(rules, e.Rule)
	}
	assert.Equal(t, []string{"version.line", "kv_version.negative", "operations.commit"}, rules)
}

// TestPackageLinksInsideAreFine: links that stay in the package, and a
// package directory reached through a link, pass CheckPackage, as does a
// command that does not exist yet. The symlink rejections are the other half.
func TestPackageLinksInsideAreFine(t *testing.T) {
	m := fullManifest()
	dir := layOut(t, m, map[string]string{
		"real/demo":           "#!/bin/sh\n",
		"bin":                 "-> real",
		"docs/playbooks/a.md": "# A",
		"playbooks":           "-> docs/playbooks",
		"docs/playbooks/b.md": "-> a.md",
		"docs/playbooks/up":   "-> ../../real",
	})
	got, err := protocol.LoadManifest(dir)
	require.NoError(t, err)
	assert.Equal(t, "demo", got.Name)

	link := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, os.Symlink(dir, link))
	_, err = protocol.LoadManifest(link)
	assert.NoError(t, err, "the package directory itself may be a link")

	require.NoError(t, os.RemoveAll(filepath.Join(dir, "real")))
	assert.NoError(t, protocol.CheckPackage(dir, m), "a dangling link inside the package leaves nothing")
	assert.NoError(t, protocol.CheckPackage(t.TempDir(), m), "nothing on disk yet")
}

func TestBuiltinOperations(t *testing.T) {
	assert.Equal(t, []string{"os.wait"}, protocol.BuiltinOperations())
	assert.True(t, protocol.IsBuiltinOperation("os.wait"))
	assert.False(t, protocol.IsBuiltinOperation("os"))
	assert.False(t, protocol.IsBuiltinOperation("os.shell"), "a name under os is no builtin unless it exists")
	assert.False(t, protocol.IsBuiltinOperation("demo.wait"))
	m := minimalManifest()
	m.Name = "os"
	assert.ErrorIs(t, m.Validate(), protocol.ErrInvalidManifest, "no extension can take the builtins' name")
}
