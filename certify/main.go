package certify

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// Usage is the synopsis of `open-conduit extension certify`.
const Usage = `usage: open-conduit extension certify [flags] DIR
       open-conduit extension certify --list [--run REGEXP] [DIR]

Certifies the extension package in DIR against the criteria of this build,
printing a line per criterion and a summary. The inputs certification
calls the package with come from DIR/certify/inputs.json when there is
one, and are otherwise built from the manifest's schemas. Exit status: 0
when every selected criterion that applies passed, 1 when one failed (or
a baseline entry is stale), 2 for a usage error, 3 when the harness
itself broke.

flags:
`

// Command is `extension certify` with its wiring: the launcher the host
// provides. Its zero value has none, so every criterion but manifest/valid
// ends as harness_error.
type Command struct {
	// Launch makes the package's process (Config.Launch).
	Launch LaunchFunc
	// Criteria overrides the registry (Config.Criteria); nil for Criteria().
	Criteria []Criterion
	// Grace overrides DefaultGrace (Config.Grace).
	Grace time.Duration
}

// Main runs `extension certify` with args (the words after "certify") and
// returns the exit status. An interrupt ends the run early; the report then
// holds what ran.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return Command{}.Main(ctx, args, stdout, stderr)
}

// flags are the parsed command line.
type flags struct {
	jsonFile, junitFile, traceFile, baselineFile, run string
	list, keep, help                                  bool
	timeout                                           time.Duration
	dir                                               string

	// faults runs the robustness pass after the run (faults.go).
	faults     bool
	faultsJSON string
}

// flagHelp is each flag's line of the usage, in order: its argument's
// name, shown once, and what it does.
var flagHelp = []struct{ name, arg, help string }{
	{"json", "FILE", "write the report as JSON to FILE (- for standard output)"},
	{"junit", "FILE", "write the report as JUnit XML to FILE (- for standard output)"},
	{"trace", "FILE", "write the wire transcript to FILE as the run goes, one JSON message per line (- for standard output)"},
	{"baseline", "FILE", "known failures: one criterion ID per line (# comments)"},
	{"run", "REGEXP", "run only the criteria whose ID matches; the others are left out of the report"},
	{"timeout", "DURATION", "how long each criterion may run, such as 45s or 2m (default " + DefaultTimeout.String() + ")"},
	{"faults", "", "then run the criteria again under each fault rule of the robustness pass (the JSON-RPC fault proxy between host and package): the package must survive or fail cleanly, never hang"},
	{"faults-json", "FILE", "write the robustness pass as JSON to FILE (- for standard output)"},
	{"list", "", "list every criterion with what it checks and its spec section, and exit"},
	{"keep", "", "keep the temporary state directory and print its path"},
	{"help", "", "print this usage and exit"},
}

// writeUsage writes the usage with one line per flag.
func writeUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString(Usage)
	for _, f := range flagHelp {
		left := "  --" + f.name
		if f.arg != "" {
			left += " " + f.arg
		}
		fmt.Fprintf(&b, "%-22s %s\n", left, f.help)
	}
	io.WriteString(w, b.String())
}

// parseFlags accepts flags before and after DIR.
func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("extension certify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&f.jsonFile, "json", "", "")
	fs.StringVar(&f.junitFile, "junit", "", "")
	fs.StringVar(&f.run, "run", "", "")
	fs.StringVar(&f.baselineFile, "baseline", "", "")
	fs.BoolVar(&f.list, "list", false, "")
	fs.DurationVar(&f.timeout, "timeout", DefaultTimeout, "")
	fs.StringVar(&f.traceFile, "trace", "", "")
	fs.BoolVar(&f.keep, "keep", false, "")
	fs.BoolVar(&f.faults, "faults", false, "")
	fs.StringVar(&f.faultsJSON, "faults-json", "", "")
	fs.BoolVar(&f.help, "help", false, "")
	usage := func() { writeUsage(stderr) }
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				f.help = true
				return f, nil
			}
			usage()
			return f, usagef("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
	if f.help {
		return f, nil
	}
	stdout := 0
	for _, p := range []string{f.jsonFile, f.junitFile, f.traceFile, f.faultsJSON} {
		if p == "-" {
			stdout++
		}
	}
	switch {
	case len(positional) > 1:
		usage()
		return f, usagef("one package directory, not %d", len(positional))
	case len(positional) == 0 && !f.list:
		usage()
		return f, usagef("no package directory")
	case f.timeout <= 0:
		return f, usagef("--timeout must be positive, not %v", f.timeout)
	case stdout > 1:
		return f, usagef("only one of --json, --junit, --trace and --faults-json may write to standard output (-)")
	case f.faultsJSON != "" && !f.faults:
		return f, usagef("--faults-json reports the robustness pass: give --faults too")
	}
	if len(positional) == 1 {
		f.dir = positional[0]
	}
	return f, nil
}

// checkReportPath refuses, before the run, a report path the run could not
// write at its end: a directory, or one in a directory that is not there
// or not writable. "-" is standard output.
func checkReportPath(flag, path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		return usagef("--%s: %s is a directory", flag, path)
	}
	probe, err := os.CreateTemp(filepath.Dir(path), ".certify-probe-*")
	if err != nil {
		return usagef("--%s: %s cannot be written: %v", flag, path, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

// Main runs the command under ctx.
func (c Command) Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "certify: %v\n", err)
		return ExitUsage
	}
	if f.help {
		writeUsage(stdout)
		return ExitOK
	}
	var sel *regexp.Regexp
	if f.run != "" {
		if sel, err = regexp.Compile(f.run); err != nil {
			fmt.Fprintf(stderr, "certify: --run: %v\n", err)
			return ExitUsage
		}
	}
	all := c.Criteria
	if all == nil {
		all = Criteria()
	}
	if f.list {
		return list(all, sel, f.dir, stdout, stderr)
	}
	var baseline []string
	if f.baselineFile != "" {
		if baseline, err = ReadBaselineFile(f.baselineFile); err != nil {
			fmt.Fprintf(stderr, "certify: %v\n", err)
			return ExitUsage
		}
	}
	for _, r := range []struct{ flag, path string }{{"json", f.jsonFile}, {"junit", f.junitFile}, {"trace", f.traceFile}, {"faults-json", f.faultsJSON}} {
		if err := checkReportPath(r.flag, r.path); err != nil {
			fmt.Fprintf(stderr, "certify: %v\n", err)
			return ExitUsage
		}
	}
	// A report on standard output keeps it to itself: progress and the
	// summary go to standard error.
	progress := stdout
	if f.jsonFile == "-" || f.junitFile == "-" || f.traceFile == "-" || f.faultsJSON == "-" {
		progress = stderr
	}
	var trace io.Writer
	var traceFile *os.File
	switch f.traceFile {
	case "":
	case "-":
		trace = stdout
	default:
		if traceFile, err = os.Create(f.traceFile); err != nil {
			fmt.Fprintf(stderr, "certify: --trace: %v\n", err)
			return ExitUsage
		}
		defer traceFile.Close()
		trace = traceFile
	}
	report, err := Run(ctx, Config{
		Dir: f.dir, Criteria: all, Select: sel, Baseline: baseline,
		Timeout: f.timeout, Grace: c.Grace, Launch: c.Launch,
		Progress: progress, Keep: f.keep, Trace: trace,
	})
	if errors.Is(err, ErrUsage) {
		fmt.Fprintf(stderr, "certify: %v\n", err)
		return ExitUsage
	}
	if report.Results == nil {
		fmt.Fprintf(stderr, "certify: %v\n", err)
		return ExitHarness
	}
	WriteSummary(progress, report)
	code := report.ExitCode()
	if err != nil {
		fmt.Fprintf(stderr, "certify: %v\n", err)
		if code == ExitOK {
			code = ExitHarness
		}
	}
	write := func(flag, path string, render func(io.Writer) error) {
		if path == "" {
			return
		}
		werr := error(nil)
		if path == "-" {
			werr = render(stdout)
		} else {
			werr = writeFile(path, render)
		}
		if werr != nil {
			fmt.Fprintf(stderr, "certify: --%s: %v\n", flag, werr)
			if code == ExitOK {
				code = ExitHarness
			}
		}
	}
	write("json", f.jsonFile, func(w io.Writer) error { return WriteJSON(w, report) })
	write("junit", f.junitFile, func(w io.Writer) error { return WriteJUnit(w, report) })
	if traceFile != nil {
		if werr := traceFile.Close(); werr != nil {
			fmt.Fprintf(stderr, "certify: --trace: %v\n", werr)
			if code == ExitOK {
				code = ExitHarness
			}
		}
	}
	if f.faults && ctx.Err() == nil {
		code = c.runFaultPass(ctx, f, Config{Dir: f.dir, Criteria: all, Select: sel, Timeout: f.timeout, Grace: c.Grace, Launch: c.Launch},
			report.Package.Name, code, progress, stdout, stderr)
	}
	return code
}

// list is --list: every criterion the pattern selects, and with DIR
// whether each applies to its manifest.
func list(all []Criterion, sel *regexp.Regexp, dir string, stdout, stderr io.Writer) int {
	var cs []Criterion
	for _, c := range all {
		if sel == nil || sel.MatchString(c.ID) {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		fmt.Fprintf(stderr, "certify: --run %q selects no criterion\n", sel.String())
		return ExitUsage
	}
	var m *protocol.Manifest
	if dir != "" {
		if err := checkDir(dir); err != nil {
			fmt.Fprintf(stderr, "certify: %v\n", err)
			return ExitUsage
		}
		var err error
		if m, err = protocol.LoadManifest(dir); err != nil {
			fmt.Fprintf(stderr, "certify: %v\n", err)
			return ExitFail
		}
	}
	WriteList(stdout, cs, m)
	return ExitOK
}

// writeFile renders into path, replacing it only once rendering succeeded.
func writeFile(path string, render func(io.Writer) error) error {
	var b bytes.Buffer
	if err := render(&b); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".certify-report-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b.Bytes())
	if err := errors.Join(werr, tmp.Chmod(0o644), tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
