package daemon

import (
	"fmt"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
)

// PackageUses lists where the configuration cfg uses what the package m
// declares: each object of one of its types (entries, connections), each
// route on one of its handlers or work kinds, each binding on one of its
// executors or granting one of its operations or toolsets, and its
// pass_env grant, as "<JSON path>: <what>". Removing a package the list
// is not empty for leaves the configuration naming what no longer exists.
func PackageUses(cfg *Config, m *protocol.Manifest) []string {
	cat := newCatalogue([]*protocol.Manifest{m})
	var uses []string
	add := func(path, format string, args ...any) {
		uses = append(uses, path+": "+fmt.Sprintf(format, args...))
	}
	for i, c := range cfg.Connections {
		if cat.connTypes[c.Type] != "" {
			add(fmt.Sprintf("$.connections[%d]", i), "connection %q of type %s", c.Name, c.Type)
		}
	}
	for i, sc := range cfg.Scopes {
		at := fmt.Sprintf("$.scopes[%d]", i)
		for j, e := range sc.Entries {
			if cat.types[e.Type] != "" {
				add(fmt.Sprintf("%s.entries[%d]", at, j), "entry %q of type %s in scope %s", e.ID, e.Type, sc.ID)
			}
		}
		for j, r := range sc.Routes {
			switch {
			case cat.handlers[r.Handler] != "":
				add(fmt.Sprintf("%s.routes[%d]", at, j), "a route on handler %s in scope %s", r.Handler, sc.ID)
			case cat.workKinds[r.Kind] != "":
				add(fmt.Sprintf("%s.routes[%d]", at, j), "a route creating work kind %s in scope %s", r.Kind, sc.ID)
			}
		}
		for j, b := range sc.Bindings {
			if cat.executors[b.Executor] != "" {
				add(fmt.Sprintf("%s.bindings[%d]", at, j), "binding %q on executor %s in scope %s", b.Name, b.Executor, sc.ID)
			}
			var granted []string
			for _, o := range b.Operations {
				if cat.operations[o] != "" {
					granted = append(granted, o)
				}
			}
			for _, ts := range b.Toolsets {
				if _, ok := cat.toolsets[ts]; ok {
					granted = append(granted, "@"+ts)
				}
			}
			if len(granted) > 0 {
				add(fmt.Sprintf("%s.bindings[%d]", at, j), "binding %q grants %s in scope %s", b.Name, strings.Join(granted, ", "), sc.ID)
			}
		}
	}
	if env := cfg.Settings.PassEnv[m.Name]; len(env) > 0 {
		add("$.settings.pass_env."+m.Name, "grants %s", strings.Join(slices.Clone(env), ", "))
	}
	return uses
}
