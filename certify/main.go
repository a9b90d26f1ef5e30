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
	"regexp"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// Usage is the synopsis of `open-conduit extension certify`.
const Usage = `usage: open-conduit extension certify [flags] DIR
       open-conduit extension certify --list [--run REGEXP] [DIR]

Certifies the extension package in DIR against the criteria of this build,
printing a line per criterion and a summary. Exit status: 0 when every
selected criterion that applies passed, 1 when one failed (or a baseline
entry is stale), 2 for a usage error, 3 when the harness itself broke.

flags:
`

// Command is `extension certify` with its wiring: the suites and the
// launcher the host provides. Its zero value has neither, so every
// criterion but manifest/valid ends as harness_error.
type Command struct {
	// Suites runs the conformance suites (Config.Suites).
	Suites Suites
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
	list, keep                                        bool
	timeout                                           time.Duration
	dir                                               string
}

// parseFlags accepts flags before and after DIR.
func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("extension certify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.jsonFile, "json", "", "write the report as JSON to `FILE`")
	fs.StringVar(&f.junitFile, "junit", "", "write the report as JUnit XML to `FILE`")
	fs.StringVar(&f.run, "run", "", "run only the criteria whose ID matches `REGEXP`; the others are left out of the report")
	fs.StringVar(&f.baselineFile, "baseline", "", "known failures: `FILE` lists one criterion ID per line (# comments)")
	fs.BoolVar(&f.list, "list", false, "list every criterion with what it checks and its spec section, and exit")
	fs.DurationVar(&f.timeout, "timeout", DefaultTimeout, "how long each criterion may run (`DURATION`)")
	fs.StringVar(&f.traceFile, "trace", "", "write the wire transcript to `FILE`, one JSON message per line")
	fs.BoolVar(&f.keep, "keep", false, "keep the temporary state directory and print its path")
	usage := func() {
		var b bytes.Buffer
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		fmt.Fprint(stderr, Usage, b.String())
	}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
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
	switch {
	case len(positional) > 1:
		usage()
		return f, usagef("one package directory, not %d", len(positional))
	case len(positional) == 0 && !f.list:
		usage()
		return f, usagef("no package directory")
	case f.timeout <= 0:
		return f, usagef("--timeout must be positive, not %v", f.timeout)
	}
	if len(positional) == 1 {
		f.dir = positional[0]
	}
	return f, nil
}

// Main runs the command under ctx.
func (c Command) Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "certify: %v\n", err)
		return ExitUsage
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
	report, err := Run(ctx, Config{
		Dir: f.dir, Criteria: all, Select: sel, Baseline: baseline,
		Timeout: f.timeout, Grace: c.Grace, Suites: c.Suites, Launch: c.Launch,
		Progress: stdout, Keep: f.keep,
	})
	if errors.Is(err, ErrUsage) {
		fmt.Fprintf(stderr, "certify: %v\n", err)
		return ExitUsage
	}
	if report.Results == nil {
		fmt.Fprintf(stderr, "certify: %v\n", err)
		return ExitHarness
	}
	WriteSummary(stdout, report)
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
		if werr := writeFile(path, render); werr != nil {
			fmt.Fprintf(stderr, "certify: --%s: %v\n", flag, werr)
			if code == ExitOK {
				code = ExitHarness
			}
		}
	}
	write("json", f.jsonFile, func(w io.Writer) error { return WriteJSON(w, report) })
	write("junit", f.junitFile, func(w io.Writer) error { return WriteJUnit(w, report) })
	write("trace", f.traceFile, func(w io.Writer) error { return WriteTrace(w, report.Trace) })
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
	return os.WriteFile(path, b.Bytes(), 0o644)
}
