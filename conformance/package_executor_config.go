package conformance

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/open-conduit/open-conduit/protocol"
)

// A binding's executor config is the executor's own: its manifest declares
// the fields, and its validate judges the rest. Certification's runs are
// shell commands (cmdQuick, cmdShort, cmdLong, the controls' stubborn job),
// which it can send as {"command": "..."} only to an executor that declares
// a command field. Any other executor's runs take the configs its author
// gives in InputsFile, one for each kind of run:
//
//	"executors": {"<executor>": {"quick": <config>, "short": <config>, "long": <config>}}
//
// quick settles succeeded at once; short runs for about a second and then
// succeeds (it must still run when certification kills the package, and be
// adopted by the restarted one); long runs for half a minute or more, until
// stopped, and serves every other run certification starts. Without them such an executor's runs cannot be started, and the
// criteria that need one fail as "could not exercise".

// InputExecutor is the configs an author gives certification for the runs
// of one executor.
type InputExecutor struct {
	Quick, Short, Long json.RawMessage
}

// commandField is the executor config field certification's commands go in.
const commandField = "command"

// runConfig is the executor config certification starts a run of the
// executor named executor with, to do what command does.
func runConfig(d PackageDriver, executor, command string) (json.RawMessage, error) {
	i := slices.IndexFunc(d.Manifest().Provides.Executors, func(e protocol.ExecutorDecl) bool { return e.Name == executor })
	if i < 0 {
		return nil, fmt.Errorf("executor %s: the manifest declares no such executor", executor)
	}
	decl := d.Manifest().Provides.Executors[i]
	if slices.ContainsFunc(decl.Fields, func(f protocol.FieldDecl) bool { return f.Name == commandField }) {
		return commandConfig(command), nil
	}
	var given json.RawMessage
	kind := "long"
	if in := authorInputs(d); in != nil {
		x := in.Executors[executor]
		switch command {
		case cmdQuick:
			given, kind = x.Quick, "quick"
		case cmdShort:
			given, kind = x.Short, "short"
		default: // cmdLong, or a run certification ends itself
			given = x.Long
		}
	}
	if len(given) == 0 {
		return nil, fmt.Errorf("could not exercise: executor %s declares no %q config field for certification's command (%s), and %s gives no %q run config for it ($.executors[%q].%s)",
			executor, commandField, command, InputsFile, kind, executor, kind)
	}
	return given, nil
}

// parseInputExecutors parses the executors member of an inputs file: each
// key an executor the manifest declares, each value an object of the
// three run configs, every one required.
func parseInputExecutors(p string, n *jnode, m *protocol.Manifest) (map[string]InputExecutor, error) {
	if n.kind != '{' {
		return nil, n.want(p, "an object of executor names to their run configs")
	}
	out := map[string]InputExecutor{}
	for i, name := range n.keys {
		q := p + member(name)
		if !slices.ContainsFunc(m.Provides.Executors, func(e protocol.ExecutorDecl) bool { return e.Name == name }) {
			return nil, &InputsError{Path: q, Message: fmt.Sprintf("%q is not an executor the manifest declares", name)}
		}
		var x InputExecutor
		config := func(out *json.RawMessage) func(string, *jnode) error {
			return func(p string, n *jnode) error {
				if n.kind != '{' {
					return n.want(p, "an executor config object")
				}
				*out = n.raw()
				return nil
			}
		}
		err := n.vals[i].object(q, map[string]func(string, *jnode) error{
			"quick": config(&x.Quick), "short": config(&x.Short), "long": config(&x.Long),
		}, []string{"quick", "short", "long"})
		if err != nil {
			return nil, err
		}
		out[name] = x
	}
	return out, nil
}
