package certify

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
)

// Uncovered is one surface the manifest declares that no criterion of the
// run exercised: the host never sent the method that serves it (for a
// named surface, never for that name). A report lists every one, so a
// certification never looks more complete than it is.
type Uncovered struct {
	// Surface names what is declared: "task notes-digest", or the
	// manifest surface of an unnamed method ("executors.controls.live").
	Surface string `json:"surface"`
	// Method is the host-to-extension method that serves it.
	Method string `json:"method"`
	// Reason says why nothing exercised it.
	Reason string `json:"reason"`
}

// namedSurface is a method the host calls once per declared name: the
// param that carries the name, and the names the manifest declares.
type namedSurface struct {
	kind  string
	param string
	names func(m *protocol.Manifest) []string
}

// namedSurfaces are the methods whose coverage is counted per declared
// name; every other enabled host-to-extension method counts once. Adding a
// named surface is one entry here.
var namedSurfaces = map[string]namedSurface{
	"task.run": {"task", "task", func(m *protocol.Manifest) (out []string) {
		for _, t := range m.Provides.Tasks {
			out = append(out, t.Name)
		}
		return out
	}},
	"check.run": {"check", "check", func(m *protocol.Manifest) (out []string) {
		for _, c := range m.Provides.Checks {
			out = append(out, c.Name)
		}
		return out
	}},
	"route.match": {"route", "handler", func(m *protocol.Manifest) (out []string) {
		for _, r := range m.Provides.Routes {
			out = append(out, r.Handler)
		}
		return out
	}},
	"route.samples": {"route samples", "handler", func(m *protocol.Manifest) (out []string) {
		for _, r := range m.Provides.Routes {
			if r.Samples {
				out = append(out, r.Handler)
			}
		}
		return out
	}},
	"operation.call": operationsOfKind(protocol.OperationKindHandler),
	"operation.wait": operationsOfKind(protocol.OperationKindWait),
	"operation.emit": operationsOfKind(protocol.OperationKindEmit),
	"recurrence.next": {"recurrence", "recurrence", func(m *protocol.Manifest) (out []string) {
		for _, r := range m.Provides.Recurrences {
			out = append(out, r.Name)
		}
		return out
	}},
	"work_kind.trigger": {"work kind trigger", "kind", func(m *protocol.Manifest) (out []string) {
		for _, k := range m.Provides.WorkKinds {
			if k.Trigger {
				out = append(out, k.Name)
			}
		}
		return out
	}},
	"executor.run": {"executor", "executor", func(m *protocol.Manifest) (out []string) {
		for _, x := range m.Provides.Executors {
			out = append(out, x.Name)
		}
		return out
	}},
	"validate":          {"validate", "type", validatedTypes},
	"ingress.push":      ingressTypes("ingress push"),
	"ingress.reconcile": ingressTypes("ingress reconcile"),
}

// validatedTypes are the types validate is asked about: each extension
// type, connection type, route handler and executor.
func validatedTypes(m *protocol.Manifest) (out []string) {
	add := func(name string) {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	for _, x := range m.Provides.Extensions {
		add(x.Type)
	}
	for _, c := range m.Provides.Connections {
		add(c.Type)
	}
	for _, r := range m.Provides.Routes {
		add(r.Handler)
	}
	for _, x := range m.Provides.Executors {
		add(x.Name)
	}
	return out
}

func operationsOfKind(kind string) namedSurface {
	return namedSurface{"operation", "operation", func(m *protocol.Manifest) (out []string) {
		for _, o := range m.Provides.Operations {
			if o.Kind == kind {
				out = append(out, o.Name)
			}
		}
		return out
	}}
}

func ingressTypes(kind string) namedSurface {
	return namedSurface{kind, "type", func(m *protocol.Manifest) (out []string) {
		for _, x := range m.Provides.Extensions {
			if x.Ingress {
				out = append(out, x.Type)
			}
		}
		return out
	}}
}

// unjudged says, for each host-to-extension method no criterion of this
// version calls, why not: the report gives it as the reason the surface is
// uncovered, so nothing is left unexplained. A criterion that comes to
// call one takes its entry out.
var unjudged = map[string]string{
	"event.render":   "criteria version 2 has no rendering criterion: the text an Event renders to is the package's own, with no rule certification could hold it to",
	"webhook.handle": "criteria version 2 sends no webhook: a delivery's verification (signatures, secrets) is the package's own, so certification cannot forge one it must accept; the daemon's webhook tests and extensiontest drive it",
}

// lifecycleMethods are served by every package and sent by every run.
var lifecycleMethods = []string{"$/cancel", "initialize", "configure", "shutdown"}

// coverage lists the surfaces m declares that the host never exercised in
// trace, sorted as the manifest's methods are. selected says the run left
// criteria out (--run), which the reason then names.
func coverage(m *protocol.Manifest, trace []WireMessage, selected bool) []Uncovered {
	if m == nil {
		return nil
	}
	// A surface is exercised by a request the package answered with a
	// result: a refusal (before initialize, of an input it could not use)
	// exercised nothing. An answer goes with the latest request of its id.
	type request struct{ method, name string }
	pending := map[string]request{}
	sent := map[string]map[string]bool{}
	refused := map[request]string{} // the first error a request of the surface was answered with
	reconciles := false             // a configure answer registered a source that reconciles
	for _, w := range trace {
		if w.Message == nil {
			continue
		}
		var msg struct {
			ID     json.RawMessage            `json:"id"`
			Method string                     `json:"method"`
			Params map[string]json.RawMessage `json:"params"`
			Result json.RawMessage            `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(w.Message, &msg) != nil || len(msg.ID) == 0 || string(msg.ID) == "null" {
			continue
		}
		switch {
		case w.Direction == DirectionToExtension && msg.Method != "":
			req := request{method: msg.Method}
			if ns, ok := namedSurfaces[msg.Method]; ok {
				_ = json.Unmarshal(msg.Params[ns.param], &req.name)
			}
			pending[string(msg.ID)] = req
		case w.Direction == DirectionFromExtension && msg.Method == "":
			req, ok := pending[string(msg.ID)]
			if ok && msg.Error != nil {
				if _, seen := refused[req]; !seen {
					refused[req] = fmt.Sprintf("%d %s", msg.Error.Code, clipReason(msg.Error.Message))
				}
			}
			if !ok || msg.Result == nil {
				continue
			}
			delete(pending, string(msg.ID))
			if req.method == "configure" && !reconciles {
				var r protocol.ConfigureResult
				if json.Unmarshal(msg.Result, &r) == nil {
					reconciles = slices.ContainsFunc(r.Sources, func(src protocol.SourceDecl) bool { return src.Reconcile })
				}
			}
			if sent[req.method] == nil {
				sent[req.method] = map[string]bool{}
			}
			sent[req.method][""], sent[req.method][req.name] = true, true
		}
	}
	reason := func(method, name string) string {
		if why, ok := unjudged[method]; ok {
			return why
		}
		if method == "ingress.reconcile" && !reconciles {
			return "no source the package registered in configure reconciles, so the host never asks for a scan"
		}
		if answer, ok := refused[request{method, name}]; ok {
			return fmt.Sprintf("asked in this run, and the package answered only with errors (the first: %s)", answer)
		}
		if selected {
			return "no criterion this run selected (--run) had it answered"
		}
		return fmt.Sprintf("no criterion of criteria version %d had it answered in this run", CriteriaVersion)
	}
	var out []Uncovered
	for _, mt := range m.EnabledMethods() {
		if mt.Direction == protocol.ExtensionToHost || slices.Contains(lifecycleMethods, mt.Name) {
			continue
		}
		if ns, ok := namedSurfaces[mt.Name]; ok {
			for _, name := range ns.names(m) {
				if !sent[mt.Name][name] {
					out = append(out, Uncovered{Surface: ns.kind + " " + name, Method: mt.Name, Reason: reason(mt.Name, name)})
				}
			}
			continue
		}
		if !sent[mt.Name][""] {
			surface := mt.Surface
			if surface == "" {
				surface = mt.Name
			}
			out = append(out, Uncovered{Surface: surface, Method: mt.Name, Reason: reason(mt.Name, "")})
		}
	}
	return out
}

// clipReason keeps an answer's message to one short line in a reason.
func clipReason(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}
