package host

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
)

// Kind is a kind of name that two registrations may not share.
type Kind string

// The kinds CheckConflicts compares.
const (
	KindName       Kind = "name"
	KindConfigType Kind = "config type"
	KindHandler    Kind = "route handler"
	KindExecutor   Kind = "executor"
	KindResource   Kind = "resource type"
	KindOperation  Kind = "operation"
	KindFamily     Kind = "family"
	KindWorkKind   Kind = "work kind"
	KindRecurrence Kind = "recurrence"
	KindSchema     Kind = "schema"
)

// Kinds lists every kind CheckConflicts compares.
func Kinds() []Kind {
	return []Kind{KindName, KindConfigType, KindHandler, KindExecutor, KindResource,
		KindOperation, KindFamily, KindWorkKind, KindRecurrence, KindSchema}
}

// HostNames are the names the host itself takes, by kind (its own route
// handlers, builtin operations …). Reserved extension names are always
// taken (protocol.ReservedNames).
type HostNames map[Kind][]string

// ErrConflictingNames is wrapped by every refusal of CheckConflicts.
var ErrConflictingNames = errors.New("conflicting registrations")

// Conflict is one name two owners claim.
type Conflict struct {
	Kind Kind
	Name string
	// Owners are the packages (or "open-conduit" for the host) that claim it.
	Owners []string
}

func (c Conflict) Error() string {
	return fmt.Sprintf("%s %q is claimed by %s", c.Kind, c.Name, strings.Join(c.Owners, " and "))
}

func (c Conflict) Unwrap() error { return ErrConflictingNames }

// Names lists what m registers, by kind.
func Names(m *protocol.Manifest) map[Kind][]string {
	p := m.Provides
	out := map[Kind][]string{KindName: {m.Name}}
	add := func(k Kind, names ...string) { out[k] = append(out[k], names...) }
	for _, e := range p.Extensions {
		add(KindConfigType, e.Type)
		for _, f := range e.Families {
			add(KindFamily, f.Name)
		}
	}
	for _, c := range p.Connections {
		add(KindConfigType, c.Type)
	}
	for _, r := range p.Routes {
		add(KindHandler, r.Handler)
	}
	for _, e := range p.Executors {
		add(KindExecutor, e.Name)
		add(KindExecutor, e.LaunchNames...)
	}
	for _, r := range p.Resources {
		add(KindResource, r.Type)
	}
	for _, s := range p.Sandboxes {
		add(KindResource, s.Type)
	}
	for _, c := range p.Containers {
		add(KindResource, c.Type)
	}
	for _, t := range p.Tunnels {
		add(KindResource, t.Type)
	}
	for _, o := range p.Operations {
		add(KindOperation, o.Name)
	}
	for _, w := range p.WorkKinds {
		add(KindWorkKind, w.Name)
	}
	for _, r := range p.Recurrences {
		add(KindRecurrence, r.Name)
	}
	for _, s := range p.Schemas {
		add(KindSchema, s.Base)
	}
	return out
}

// hostOwner names the host as the owner of its own names.
const hostOwner = "open-conduit"

// CheckConflicts checks a whole set of packages at once: against the
// reserved names, against host (the names the host itself takes) and
// against each other, for every Kind. It returns nil when every package
// may be admitted, and otherwise every conflict joined (each an
// error wrapping ErrConflictingNames): then none may be admitted.
func CheckConflicts(pkgs []Package, host HostNames) error {
	// owners[kind][name] lists the claimants; each package claims a name
	// once, so the same package listed twice conflicts with itself.
	type claimant struct {
		label string
		index int // -1 for the host
	}
	owners := map[Kind]map[string][]claimant{}
	claim := func(k Kind, name string, c claimant) {
		if owners[k] == nil {
			owners[k] = map[string][]claimant{}
		}
		if !slices.Contains(owners[k][name], c) {
			owners[k][name] = append(owners[k][name], c)
		}
	}
	hostClaim := claimant{hostOwner, -1}
	for _, r := range protocol.ReservedNames() {
		claim(KindName, r, hostClaim)
	}
	for k, names := range host {
		for _, n := range names {
			claim(k, n, hostClaim)
		}
	}
	var errs []error
	for i, p := range pkgs {
		if p.Manifest == nil {
			errs = append(errs, fmt.Errorf("%w: package %q has no manifest", ErrConflictingNames, p.Name))
			continue
		}
		for k, names := range Names(p.Manifest) {
			for _, n := range names {
				claim(k, n, claimant{p.Manifest.Name, i})
				// A name owned under a reserved name ("os-x", "core.y")
				// is the host's, whatever its kind.
				for _, r := range protocol.ReservedNames() {
					if protocol.OwnsName(r, n) || protocol.OwnsDotted(r, n) || protocol.SourceNamespace(r, n) {
						claim(k, n, hostClaim)
					}
				}
			}
		}
	}
	for _, k := range Kinds() {
		names := make([]string, 0, len(owners[k]))
		for n := range owners[k] {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			if cs := owners[k][n]; len(cs) > 1 {
				labels := make([]string, len(cs))
				for i, c := range cs {
					labels[i] = c.label
				}
				errs = append(errs, Conflict{Kind: k, Name: n, Owners: labels})
			}
		}
	}
	return errors.Join(errs...)
}
