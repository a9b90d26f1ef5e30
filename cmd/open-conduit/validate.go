package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/open-conduit/open-conduit/protocol"
)

// validateReport is the JSON form of `extension validate`.
type validateReport struct {
	Path     string            `json:"path"`
	Name     string            `json:"name,omitempty"`
	Version  string            `json:"version,omitempty"`
	Valid    bool              `json:"valid"`
	Newer    bool              `json:"needs_newer_open_conduit,omitempty"`
	Problems []validateProblem `json:"problems,omitempty"`
	Enables  []string          `json:"enables,omitempty"`
}

// validateProblem is one refusal: its rule, the JSON path of the value, and
// for a refusal of the JSON itself the line and column (from 1) where it is.
type validateProblem struct {
	Rule    string `json:"rule,omitempty"`
	Path    string `json:"path,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
}

func validateCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("extension validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprint(stderr, "usage: open-conduit extension validate [--json] PATH\n")
		return exitUsage
	}
	report := validateManifest(fs.Arg(0))
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			fmt.Fprintln(stderr, err)
			return exitFail
		}
	} else {
		printValidateReport(stdout, report)
	}
	if !report.Valid {
		return exitFail
	}
	return exitOK
}

// validateManifest reads PATH (a directory or a manifest file), parses it
// strictly and validates it, then checks the files it names in its
// package directory (the file's directory), as discovery does.
func validateManifest(path string) validateReport {
	report := validateReport{Path: path}
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		path = filepath.Join(path, protocol.ManifestFile)
	}
	data, err := protocol.ReadManifestFile(path)
	if err != nil && len(protocol.ManifestErrors(err)) == 0 {
		report.Problems = []validateProblem{{Message: err.Error()}}
		return report
	}
	var m *protocol.Manifest
	if err == nil {
		m, err = protocol.DecodeManifest(data)
	}
	if err == nil {
		err = protocol.LocateManifestErrors(data, m.Validate())
	}
	if err == nil {
		err = protocol.CheckPackage(filepath.Dir(path), m)
	}
	if m != nil {
		report.Name, report.Version = m.Name, m.Version
	}
	if err != nil {
		report.Newer = errors.Is(err, protocol.ErrNewerManifest)
		report.Problems = problemsOf(err)
		return report
	}
	report.Valid = true
	for _, method := range protocol.Methods() {
		if m.Enabled(method.Name) {
			report.Enables = append(report.Enables, method.Name)
		}
	}
	return report
}

// problemsOf lists each refusal in err, naming its rule and field when it
// has them.
func problemsOf(err error) []validateProblem {
	var out []validateProblem
	for _, me := range protocol.ManifestErrors(err) {
		out = append(out, validateProblem{Rule: me.Rule, Path: me.Path, Line: me.Line, Column: me.Column, Message: me.Message})
	}
	if len(out) == 0 {
		out = []validateProblem{{Message: err.Error()}}
	}
	return out
}

func printValidateReport(w io.Writer, r validateReport) {
	if r.Valid {
		fmt.Fprintf(w, "%s: %s %s is valid; it enables %d methods\n", r.Path, r.Name, r.Version, len(r.Enables))
		for _, m := range r.Enables {
			fmt.Fprintf(w, "  %s\n", m)
		}
		return
	}
	what := "invalid manifest"
	if r.Newer {
		what = "needs a newer Open Conduit"
	}
	fmt.Fprintf(w, "%s: %s\n", r.Path, what)
	for _, p := range r.Problems {
		switch {
		case p.Rule != "":
			where := (&protocol.ManifestError{Path: p.Path, Line: p.Line, Column: p.Column}).Where()
			fmt.Fprintf(w, "  %s at %s: %s\n", p.Rule, where, p.Message)
		default:
			fmt.Fprintf(w, "  %s\n", p.Message)
		}
	}
}
