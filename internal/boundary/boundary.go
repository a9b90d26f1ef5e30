// Package boundary holds the project's import rules and the checker that
// enforces them over the package graph `go list -deps -test -json` prints.
//
// The rules are data: each names the packages it governs and what their
// non-test code may depend on, inside the module and outside it. Every
// package of the module must be governed by exactly one rule, so a new
// package cannot slip in without a decision about its place.
package boundary

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
)

// Module is the project's module path.
const Module = "github.com/open-conduit/open-conduit"

// Package is the part of `go list -json` output the checker reads.
type Package struct {
	ImportPath string
	Standard   bool
	// ForTest is set on a package recompiled for another package's tests.
	ForTest string
	// Deps are the transitive dependencies of the package.
	Deps []string
	// Imports are the direct imports.
	Imports []string
}

// Rule governs the packages matching one of Packages (a path relative to
// the module, with a trailing "/..." for a subtree).
type Rule struct {
	Packages []string
	// Project lists the module packages the governed code may depend on
	// (same pattern form). A governed package may always depend on
	// packages governed by the same rule.
	Project []string
	// ThirdParty lists import-path prefixes of modules outside the
	// standard library the governed code may depend on.
	ThirdParty []string
	// Isolated forbids the governed subtrees (extensions/notes,
	// extensions/runner, …) from depending on one another.
	Isolated bool
	// Why is the rule as DESIGN.md states it.
	Why string
}

// sqliteModules is modernc.org/sqlite with the modules it depends on.
var sqliteModules = []string{
	"modernc.org/", "golang.org/x/sys/", "github.com/google/uuid", "github.com/dustin/go-humanize",
	"github.com/mattn/go-isatty", "github.com/ncruces/go-strftime", "github.com/remyoudompheng/bigfft",
}

var testModules = []string{
	"github.com/stretchr/testify/", "github.com/davecgh/go-spew/", "github.com/pmezard/go-difflib/",
	"gopkg.in/yaml.v3", "go.yaml.in/yaml/", "github.com/rogpeppe/go-internal/", "golang.org/x/tools/",
}

// Rules are DESIGN.md's import rules.
var Rules = []Rule{
	{Packages: []string{"protocol", "protocol/jsonrpc"}, Why: "the wire contract and the transport import the standard library only"},
	{Packages: []string{"runtime"}, Why: "the coordination core imports the standard library only"},
	{Packages: []string{"runtime/runtimetest"}, Project: []string{"runtime"}, Why: "the runtime's test helpers import the runtime and the standard library only"},
	{Packages: []string{"protocol/sdk/jobs"}, Project: []string{"protocol", "protocol/jsonrpc", "protocol/sdk", "protocol/sdk/procwatch"},
		Why: "the executor job model stands on the SDK and its process watching only, as a third party's executor would"},
	{Packages: []string{"protocol/sdk/..."}, Project: []string{"protocol", "protocol/jsonrpc"},
		Why: "the SDK imports protocol/* only, exactly as a third party would"},
	{Packages: []string{"runtime/sqlite"}, Project: []string{"runtime"}, ThirdParty: sqliteModules,
		Why: "the SQLite store imports runtime and modernc.org/sqlite"},
	{Packages: []string{"host", "host/hosttest", "host/internal/..."}, Project: []string{"protocol/...", "runtime"},
		Why: "the host imports protocol/* and runtime; never runtime/sqlite, never an extension"},
	{Packages: []string{"host/packages"}, Project: []string{"protocol/...", "runtime", "host"},
		Why: "packaging owns the install tree over host's discovery and conflict check; never the store, the daemon or an extension"},
	{Packages: []string{"host/faultproxy"}, Project: []string{"protocol/..."},
		Why: "the fault proxy is host-level: it imports protocol/* and the standard library only"},
	{Packages: []string{"host/invoke"}, Project: []string{"protocol/..."},
		Why: "the one-shot invocation imports protocol/* only, like the host, and needs no runtime"},
	{Packages: []string{"conformance", "conformance/internal/..."}, Project: []string{"protocol/...", "runtime"},
		Why: "the suites import public contracts only; never runtime/sqlite"},
	{Packages: []string{"certify/..."}, Project: []string{"conformance/...", "host/...", "runtime", "runtime/sqlite", "protocol/...", "client"},
		ThirdParty: sqliteModules, Why: "certify composes the suites and the host through host/daemon's composition (which speaks client's wire types)"},
	{Packages: []string{"client/..."}, Project: []string{"protocol"}, Why: "the management client speaks the public wire shapes"},
	{Packages: []string{"extensiontest/..."}, Project: []string{"client/...", "protocol/..."},
		Why: "the authors' harness drives the daemon through client only, never internal/ or host"},
	{Packages: []string{"extensions/schedule/..."}, Project: []string{"protocol/..."}, ThirdParty: []string{"github.com/robfig/cron/v3"},
		Why: "an extension imports protocol/* only; schedule may add robfig/cron"},
	{Packages: []string{"extensions/...", "testdata/extensions/..."}, Project: []string{"protocol/..."}, Isolated: true,
		Why: "an extension imports protocol/* only, never another extension"},
	{Packages: []string{"host/daemon/...", "cmd/...", "internal/...", "scenarios/..."}, Project: []string{"..."},
		ThirdParty: append(append([]string{"github.com/robfig/cron/v3"}, sqliteModules...), testModules...),
		Why:        "the composition root and the binary may import anything of the module"},
}

// Violation is one dependency a rule forbids.
type Violation struct {
	Package string
	Dep     string
	Why     string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s imports %s: %s", v.Package, v.Dep, v.Why)
}

// Check returns every violation of rules in pkgs, and the module packages no
// rule governs. A package's own test code (its internal and external test
// packages) is held to its rule widened to the whole module and the test
// modules: tests may drive the real store or the host, but may not pull in
// a third-party module the rules do not name. Dependencies recompiled for a
// test are checked as themselves.
func Check(pkgs []Package, rules []Rule) (violations []Violation, ungoverned []string) {
	for _, p := range pkgs {
		if p.Standard || strings.HasSuffix(p.ImportPath, ".test") {
			continue
		}
		importPath, _, variant := strings.Cut(p.ImportPath, " [")
		if variant {
			importPath = strings.TrimSuffix(importPath, "_test")
			if importPath != p.ForTest {
				continue // a dependency recompiled for someone's test
			}
		}
		rel, ok := relative(importPath)
		if !ok {
			continue
		}
		rule, ok := governing(rel, rules)
		if !ok {
			ungoverned = append(ungoverned, importPath)
			continue
		}
		if variant {
			rule.Project = []string{"..."}
			rule.ThirdParty = append(append(append([]string(nil), rule.ThirdParty...), testModules...), sqliteModules...)
		}
		for _, d := range p.Deps {
			d, _, _ = strings.Cut(d, " [")
			if isStandard(d) {
				continue
			}
			if drel, inModule := relative(d); inModule {
				if matchAny(drel, rule.Project) || (matchAny(drel, rule.Packages) && (!rule.Isolated || sameSubtree(rel, drel))) {
					continue
				}
			} else if slices.ContainsFunc(rule.ThirdParty, func(prefix string) bool { return strings.HasPrefix(d, prefix) }) {
				continue
			}
			violations = append(violations, Violation{Package: p.ImportPath, Dep: d, Why: rule.Why})
		}
	}
	sort.Strings(ungoverned)
	ungoverned = slices.Compact(ungoverned)
	return violations, ungoverned
}

// sameSubtree reports whether a and b share their first two path elements
// (one extension's packages).
func sameSubtree(a, b string) bool {
	top := func(p string) string {
		parts := strings.SplitN(p, "/", 3)
		return strings.Join(parts[:min(2, len(parts))], "/")
	}
	return top(a) == top(b)
}

func governing(rel string, rules []Rule) (Rule, bool) {
	for _, r := range rules {
		if matchAny(rel, r.Packages) {
			return r, true
		}
	}
	return Rule{}, false
}

func relative(importPath string) (string, bool) {
	if importPath == Module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(importPath, Module+"/")
	return rel, ok
}

// isStandard reports whether an import path is the standard library's: its
// first element has no dot.
func isStandard(importPath string) bool {
	first, _, _ := strings.Cut(importPath, "/")
	return !strings.Contains(first, ".")
}

func matchAny(rel string, patterns []string) bool {
	for _, pat := range patterns {
		if pat == "..." {
			return true
		}
		if base, ok := strings.CutSuffix(pat, "/..."); ok {
			if rel == base || strings.HasPrefix(rel, base+"/") {
				return true
			}
			continue
		}
		if ok, _ := path.Match(pat, rel); ok {
			return true
		}
	}
	return false
}
