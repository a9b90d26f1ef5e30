package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/host/daemon"
)

const configCheckDetails = `config check validates CONFIG/config.json with no daemon and no store, as
serve would before applying it: strictly parsed, every reference checked
against the packages installed under CONFIG/extensions/ or bundled beside the
binary, and each object checked by its package's validate. Only a package
whose objects the configuration has is started, for validate alone (a
temporary state directory, removed afterwards; a 15 s start timeout), and
stopped when done; a package that cannot start has its objects refused
with extension_unavailable. Every problem is listed with its JSON path and
rule. A missing config.json is the empty configuration, which is valid.

It is also the offline doctor: every check a started package declares
offline runs (check.run, with the view of how the configuration uses the
package) when an enabled scope uses the package, and is listed as doctor
lists it (ok, info, warn or fail). No package is started for a check alone.

flags:
  --config DIR  the config directory (default $XDG_CONFIG_HOME/open-conduit,
                else ~/.config/open-conduit)
  --json        print the report as JSON

Exit status: 0 when the configuration is valid and no offline check fails,
1 when it is not valid, a check fails or the configuration cannot be read,
2 for a usage error.
`

// configCheckReport is the JSON form of `config check`.
type configCheckReport struct {
	File  string `json:"file"`
	Found bool   `json:"found"`
	*daemon.OfflineCheck
}

func configCheckCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("config check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	configDir := fs.String("config", "", "the config directory")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "open-conduit config check: %v\nRun \"open-conduit config check --help\" for usage.\n", err)
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "open-conduit config check: takes no arguments, got %q\nRun \"open-conduit config check --help\" for usage.\n", fs.Args())
		return exitUsage
	}
	if *configDir == "" {
		cfg, _, err := defaultDirs(os.Getenv)
		if err != nil {
			fmt.Fprintf(stderr, "open-conduit config check: %v; give --config\n", err)
			return exitUsage
		}
		*configDir = cfg
	}
	if info, err := os.Stat(*configDir); err != nil || !info.IsDir() {
		// A mistyped --config would otherwise check the empty
		// configuration and pass.
		fmt.Fprintf(stderr, "open-conduit config check: %s is not a config directory\n", *configDir)
		return exitFail
	}
	file := filepath.Join(*configDir, daemon.ConfigFile)
	doc, found, err := daemon.ReadConfigFile(*configDir)
	if err != nil {
		fmt.Fprintf(stderr, "open-conduit config check: %v\n", err)
		return exitFail
	}
	bundled, err := host.BundledRoot()
	if err != nil {
		bundled = ""
	}
	exe, _ := os.Executable()
	ctx, stop := opsContext()
	defer stop()
	res, err := daemon.CheckOffline(ctx, daemon.CheckOptions{ConfigDir: *configDir, BundledDir: bundled,
		Executable: exe, Version: binaryVersion()}, doc)
	if err != nil {
		fmt.Fprintf(stderr, "open-conduit config check: %v\n", err)
		return exitFail
	}
	report := configCheckReport{File: file, Found: found, OfflineCheck: res}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			fmt.Fprintln(stderr, err)
			return exitFail
		}
	} else {
		printConfigCheck(stdout, report)
	}
	if !res.Valid {
		return exitFail
	}
	if n := res.ChecksFailed(); n > 0 {
		fmt.Fprintf(stderr, "open-conduit config check: %d checks failed\n", n)
		return exitFail
	}
	return exitOK
}

func printConfigCheck(w io.Writer, r configCheckReport) {
	for _, p := range r.Started {
		if p.Error != "" {
			fmt.Fprintf(w, "  package %s %s did not start: %s\n", p.Name, p.Version, p.Error)
		} else {
			fmt.Fprintf(w, "  package %s %s started for validate\n", p.Name, p.Version)
		}
	}
	for _, p := range r.Refused {
		fmt.Fprintf(w, "  package %s refused at discovery: %s\n", p.Name, strings.Join(strings.Fields(p.LastError), " "))
	}
	switch {
	case !r.Found && r.Valid:
		fmt.Fprintf(w, "%s: no such file: the empty configuration (no scopes) is valid\n", r.File)
	case r.Valid:
		fmt.Fprintf(w, "%s: valid\n", r.File)
	default:
		fmt.Fprintf(w, "%s: invalid (%d problems)\n", r.File, len(r.Diagnostics))
		printDiagnostics(w, r.Diagnostics)
	}
	if len(r.Checks) > 0 {
		fmt.Fprintln(w, "offline checks:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		printDoctorChecks(tw, r.Checks)
		_ = tw.Flush()
	}
}
