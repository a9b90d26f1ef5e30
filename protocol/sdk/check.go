package sdk

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
)

// optionalMethods are enabled by a surface but have a host-side fallback,
// so the SDK answers them method_not_found: event.render falls back to
// the host's generic rendering.
var optionalMethods = map[string]bool{"event.render": true}

// checkExtension matches ext's handlers against the manifest m declares,
// so a mismatch is an error when serving starts rather than a request
// answered wrongly later.
func checkExtension(ext *Extension, m *protocol.Manifest) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	p := &m.Provides

	// sameKeys reports handlers without a declaration and declarations
	// without a handler.
	sameKeys := func(what string, declared []string, have []string) {
		for _, name := range have {
			if !slices.Contains(declared, name) {
				fail("%s %q has a handler but the manifest does not declare it", what, name)
			}
		}
		for _, name := range declared {
			if !slices.Contains(have, name) {
				fail("the manifest declares %s %q but the Extension has no handler for it", what, name)
			}
		}
	}
	need := func(set bool, declared bool, what string) {
		switch {
		case declared && !set:
			fail("the manifest declares %s but its handler is nil", what)
		case set && !declared:
			fail("%s has a handler but the manifest does not declare it", what)
		}
	}

	var routes []string
	for _, r := range p.Routes {
		routes = append(routes, r.Handler)
		if h, ok := ext.Routes[r.Handler]; ok {
			need(h.Match != nil, true, fmt.Sprintf("route %q match", r.Handler))
			need(h.Samples != nil, r.Samples, fmt.Sprintf("route %q samples", r.Handler))
		}
	}
	sameKeys("route handler", routes, slices.Collect(maps.Keys(ext.Routes)))

	webhooks := false
	for _, x := range p.Extensions {
		webhooks = webhooks || x.Webhooks
	}
	need(ext.Webhook != nil, webhooks, "webhooks (an extension type with webhooks)")
	need(ext.TelemetrySink != nil, holdsPermission(m, protocol.PermissionTelemetrySink), "the permission telemetry.sink")

	var ingress []string
	for _, x := range p.Extensions {
		if x.Ingress {
			ingress = append(ingress, x.Type)
		}
	}
	sameKeys("ingress type", ingress, slices.Collect(maps.Keys(ext.Ingress)))

	var ops []string
	for _, o := range p.Operations {
		ops = append(ops, o.Name)
		h, ok := ext.Operations[o.Name]
		if !ok {
			continue
		}
		at := fmt.Sprintf("operation %q", o.Name)
		need(h.Handler != nil || h.Pure != nil, o.Kind == protocol.OperationKindHandler, at+" (kind handler)")
		if h.Handler != nil && h.Pure != nil {
			fail("%s sets both Handler and Pure: set one", at)
		}
		need(h.Wait != nil, o.Kind == protocol.OperationKindWait, at+" (kind wait)")
		need(h.DependencyFilter != nil, o.DependencyFilter, at+" dependency_filter")
		need(h.Emit != nil, o.Kind == protocol.OperationKindEmit, at+" (kind emit)")
		need(h.Commit != nil, o.Commit, at+" commit")
	}
	sameKeys("operation", ops, slices.Collect(maps.Keys(ext.Operations)))

	var recs []string
	for _, r := range p.Recurrences {
		recs = append(recs, r.Name)
	}
	sameKeys("recurrence", recs, slices.Collect(maps.Keys(ext.Recurrences)))

	var triggers []string
	for _, k := range p.WorkKinds {
		if k.Trigger {
			triggers = append(triggers, k.Name)
		}
	}
	sameKeys("work kind with trigger", triggers, slices.Collect(maps.Keys(ext.Triggers)))

	var executors []string
	for _, x := range p.Executors {
		executors = append(executors, x.Name)
		h, ok := ext.Executors[x.Name]
		if !ok {
			continue
		}
		at := fmt.Sprintf("executor %q", x.Name)
		need(h.Run != nil, true, at+" run")
		need(h.Wait != nil, true, at+" wait")
		need(h.Recover != nil, true, at+" recover")
		need(h.Resume != nil, x.Labels.Resume, at+" label resume")
		need(h.Inject != nil, x.Labels.Inject, at+" label inject")
		need(h.Interrupt != nil, x.Labels.Interrupt, at+" label interrupt")
		need(h.Stop != nil, x.Controls.Stop, at+" control stop")
		need(h.Forget != nil, x.Controls.Forget, at+" control forget")
		need(h.Attach != nil, x.Controls.Attach, at+" control attach")
		need(h.Live != nil, x.Controls.Live, at+" control live")
	}
	sameKeys("executor", executors, slices.Collect(maps.Keys(ext.Executors)))

	var tasks []string
	for _, t := range p.Tasks {
		tasks = append(tasks, t.Name)
	}
	sameKeys("task", tasks, slices.Collect(maps.Keys(ext.Tasks)))

	var checks []string
	for _, c := range p.Checks {
		checks = append(checks, c.Name)
	}
	sameKeys("check", checks, slices.Collect(maps.Keys(ext.Checks)))

	// Upcasters: one step for every declared version below the current.
	var steps []string
	for _, s := range p.Schemas {
		if len(s.Versions) == 0 {
			continue
		}
		current := s.Versions[len(s.Versions)-1]
		for v := s.Versions[0]; v < current; v++ {
			steps = append(steps, protocol.SchemaID(s.Base, v))
		}
	}
	sameKeys("upcaster for schema", steps, slices.Collect(maps.Keys(ext.Upcasters)))

	// Every surface the manifest enables must be one this SDK serves,
	// apart from those the host does without.
	for _, mt := range m.EnabledMethods() {
		if mt.Direction != protocol.HostToExtension || mt.Surface == "" || mt.Notification || optionalMethods[mt.Name] {
			continue
		}
		if _, ok := dispatch[mt.Name]; !ok {
			fail("the manifest enables %s (surface %s), which this SDK does not serve", mt.Name, mt.Surface)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return fmt.Errorf("sdk: extension %q does not match its manifest: %w", m.Name, errors.Join(errs...))
}
