package packages

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
)

// permissionAllows says, in the operator's terms, what each permission
// lets a package do. Every known permission has a line
// (TestEveryPermissionIsExplained).
var permissionAllows = map[string]string{
	protocol.PermissionTelemetrySink:    "receives every telemetry event the host records, from every scope: it sees the whole machine's activity",
	protocol.PermissionTelemetryCapture: "records named telemetry events for its configured scopes or the machine, which every sink receives",
	protocol.PermissionProbes:           "lists and runs the read-only setup probes of the host, its packages and executors",
	protocol.PermissionConfigRead:       "reads the whole configuration (secrets redacted) and builds candidates for the operator to review; never applies one",
	protocol.PermissionWorkStartGate:    "is asked before the first attempt of any Work in its scopes starts, and may hold or refuse it",
	protocol.PermissionOperationGate:    "is asked about every other package's toolbelt call in its scopes, and may park or refuse it",
	protocol.PermissionActionSubmit:     "takes actions for people it identified on its own surface, and lists the actions every provider offers",
}

// PermissionAllows is what permission lets a package do, "" for a
// permission this build does not know.
func PermissionAllows(permission string) string { return permissionAllows[permission] }

// Permission is one permission a package asks for and what it allows.
type Permission struct {
	Name   string `json:"name"`
	Allows string `json:"allows"`
}

// Method is one wire method the manifest enables.
type Method struct {
	Name string `json:"name"`
	// Direction is "host-to-extension" (the host calls the package) or
	// "extension-to-host".
	Direction string `json:"direction"`
	Use       string `json:"use"`
}

// Schema is one payload schema base and the versions the release reads;
// it writes the last.
type Schema struct {
	Base     string `json:"base"`
	Versions []int  `json:"versions"`
}

// Description is a package's manifest in words: what the operator
// consents to at install and what inspect shows.
type Description struct {
	Name     string             `json:"name"`
	Title    string             `json:"title,omitempty"`
	Version  string             `json:"version"`
	Command  []string           `json:"command"`
	Protocol []protocol.Version `json:"protocol"`
	// KVVersion is the manifest's kv_version, the layout it migrates KV to.
	KVVersion int `json:"kv_version"`
	// Surfaces are the manifest's surfaces (protocol.Manifest.Surfaces).
	Surfaces []string `json:"surfaces"`
	// Registers lists the names the package takes, by kind (config type,
	// route handler, executor, operation …).
	Registers map[string][]string `json:"registers"`
	// Methods are the host-to-extension methods its surfaces enable: what
	// the host will call it for.
	Methods     []Method     `json:"methods"`
	Permissions []Permission `json:"permissions"`
	Schemas     []Schema     `json:"schemas"`
	// PassEnv are the daemon variables the configuration grants it
	// (settings.pass_env); without a grant it gets the baseline only.
	PassEnv []string `json:"pass_env"`
	// Digest is the package tree's digest (Digest), Dir where it lives.
	Digest string `json:"digest,omitempty"`
	Dir    string `json:"dir,omitempty"`
	// Origin is "installed", "bundled" or "source" (a directory or archive
	// not installed).
	Origin string `json:"origin,omitempty"`
}

// Describe describes the manifest m; the caller fills Digest, Dir, Origin
// and PassEnv.
func Describe(m *protocol.Manifest) Description {
	d := Description{Name: m.Name, Title: m.Title, Version: m.Version, Command: slices.Clone(m.Command),
		Protocol: slices.Clone(m.Protocol), KVVersion: m.KVVersion, Surfaces: m.Surfaces(),
		Registers: map[string][]string{}, Methods: []Method{}, Permissions: []Permission{}, Schemas: []Schema{}, PassEnv: []string{}}
	if d.Surfaces == nil {
		d.Surfaces = []string{}
	}
	for kind, names := range host.Names(m) {
		if kind == host.KindName {
			continue
		}
		d.Registers[string(kind)] = slices.Sorted(slices.Values(names))
	}
	for _, mt := range m.EnabledMethods() {
		if mt.Direction == protocol.HostToExtension && mt.Surface != "" || mt.Permission != "" {
			d.Methods = append(d.Methods, Method{Name: mt.Name, Direction: mt.Direction.String(), Use: mt.Use})
		}
	}
	for _, p := range m.Permissions {
		d.Permissions = append(d.Permissions, Permission{Name: p, Allows: PermissionAllows(p)})
	}
	for _, s := range m.Provides.Schemas {
		d.Schemas = append(d.Schemas, Schema{Base: s.Base, Versions: slices.Clone(s.Versions)})
	}
	return d
}

// WriteText writes d as the operator reads it at install and inspect.
func (d Description) WriteText(w io.Writer) {
	title := d.Name
	if d.Title != "" {
		title = fmt.Sprintf("%s (%s)", d.Name, d.Title)
	}
	fmt.Fprintf(w, "%s %s\n", title, d.Version)
	if d.Origin != "" || d.Dir != "" {
		fmt.Fprintf(w, "  where:        %s %s\n", d.Origin, d.Dir)
	}
	if d.Digest != "" {
		fmt.Fprintf(w, "  digest:       %s\n", d.Digest)
	}
	fmt.Fprintf(w, "  runs:         %s\n", strings.Join(d.Command, " "))
	fmt.Fprintf(w, "  protocol:     %v\n", d.Protocol)
	fmt.Fprintf(w, "  kv_version:   %d\n", d.KVVersion)
	fmt.Fprintf(w, "  surfaces:     %s\n", orNone(strings.Join(d.Surfaces, ", ")))
	kinds := slices.Sorted(func(yield func(string) bool) {
		for k := range d.Registers {
			if !yield(k) {
				return
			}
		}
	})
	if len(kinds) > 0 {
		fmt.Fprintln(w, "  registers:")
		for _, k := range kinds {
			fmt.Fprintf(w, "    %-14s %s\n", k+":", strings.Join(d.Registers[k], ", "))
		}
	}
	if len(d.Methods) > 0 {
		fmt.Fprintln(w, "  the host calls it for:")
		for _, m := range d.Methods {
			fmt.Fprintf(w, "    %-22s %s\n", m.Name, m.Use)
		}
	}
	if len(d.Permissions) == 0 {
		fmt.Fprintln(w, "  permissions:  none (only its own surfaces, KV namespaces and scopes)")
	} else {
		fmt.Fprintln(w, "  permissions:")
		for _, p := range d.Permissions {
			fmt.Fprintf(w, "    %-18s %s\n", p.Name, p.Allows)
		}
	}
	if len(d.Schemas) > 0 {
		fmt.Fprintln(w, "  schemas:")
		for _, s := range d.Schemas {
			fmt.Fprintf(w, "    %-18s reads versions %v, writes v%d\n", s.Base, s.Versions, s.Versions[len(s.Versions)-1])
		}
	}
	if len(d.PassEnv) == 0 {
		fmt.Fprintln(w, "  pass_env:     none granted (the baseline environment only; grant with settings.pass_env)")
	} else {
		fmt.Fprintf(w, "  pass_env:     %s (granted by settings.pass_env)\n", strings.Join(d.PassEnv, ", "))
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// CheckKV refuses a release whose kv_version is below stored, the KV
// layout the store records for the package: once a release has migrated
// KV, an older one is never started on it.
func CheckKV(m *protocol.Manifest, stored int) error {
	if m.KVVersion < stored {
		return fmt.Errorf("%w: %s %s has kv_version %d, older than the KV layout %d the store records: an older release never runs on migrated KV; restore a backup of the state directory taken before the upgrade, or install a release with kv_version %d or newer",
			ErrKVDowngrade, m.Name, m.Version, m.KVVersion, stored, stored)
	}
	return nil
}
