package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/open-conduit/open-conduit/host/invoke"
)

// invokeDetails is `extension invoke --help` after the synopsis.
var invokeDetails = func() string {
	var b strings.Builder
	b.WriteString(`Runs the package in DIR for exactly one call, without a daemon: initialize, an empty
configure, METHOD with its params, shutdown. The process gets the environment the
--env and --pass-env flags give it and nothing else (not even PATH), a fresh temporary
working directory, a session and process group of its own and no inherited descriptor.
Its requests to the host are answered unsupported. Each stage is reported on stderr.

flags:
  --params JSON       the call's params, a JSON object (default {}); "-" reads them from stdin,
                      which keeps them out of the process list
  --env NAME=VALUE    set a variable in the process's environment (repeatable)
  --pass-env NAME     pass this variable's value from the invoking environment (repeatable)
  --limits JSON       limits as a JSON object, such as {"wall_time_ms":2000}; the flags below win
`)
	for _, r := range invoke.LimitRanges {
		fmt.Fprintf(&b, "  --%-17s %d to %d (default %d)\n", limitFlag(r), r.Min, r.Max, r.Default)
	}
	b.WriteString(`  --json              print the outcome as JSON on stdout

A failure ends in one code: ` + strings.Join(codeNames()[:4], ", ") + `,
` + strings.Join(codeNames()[4:], ", ") + ` (size_limit names the stream).
Diagnostics never repeat the params, environment values or the extension's output.
Exit status: 0 when the call succeeded, 1 when it failed, 2 for a usage error
(invalid_invocation included).
`)
	return b.String()
}()

func limitFlag(r invoke.LimitRange) string { return strings.ReplaceAll(r.Name, "_", "-") }

func codeNames() []string {
	var out []string
	for _, c := range invoke.Codes() {
		out = append(out, string(c))
	}
	return out
}

// invokeReport is the JSON form of `extension invoke`.
type invokeReport struct {
	OK       bool             `json:"ok"`
	Response *invoke.Response `json:"response,omitempty"`
	Error    *invoke.Error    `json:"error,omitempty"`
}

// repeated is a flag that may be given more than once.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// runInvoke is invoke.Invoke; a variable so a test can watch the request.
var runInvoke = invoke.Invoke

func invokeCommand(args []string, stdout, stderr io.Writer) int {
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "open-conduit extension invoke: %s\nRun \"open-conduit extension invoke --help\" for usage.\n", msg)
		return exitUsage
	}
	fs := flag.NewFlagSet("extension invoke", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	params := fs.String("params", "", "")
	limitsJSON := fs.String("limits", "", "")
	asJSON := fs.Bool("json", false, "")
	var env, passEnv repeated
	fs.Var(&env, "env", "")
	fs.Var(&passEnv, "pass-env", "")
	flagLimits := map[string]*int64{}
	for _, r := range invoke.LimitRanges {
		flagLimits[r.Name] = fs.Int64(limitFlag(r), r.Default, "")
	}
	var positional []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return usage(err.Error())
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(positional) != 2 {
		return usage("want DIR and METHOD")
	}

	lim := invoke.DefaultLimits()
	if *limitsJSON != "" {
		var err error
		if lim, err = invoke.ParseLimits([]byte(*limitsJSON)); err != nil {
			return usage(err.Error())
		}
	}
	fs.Visit(func(f *flag.Flag) {
		for _, r := range invoke.LimitRanges {
			if f.Name == limitFlag(r) {
				*r.Field(&lim) = *flagLimits[r.Name]
			}
		}
	})
	req := invoke.Request{Dir: positional[0], Method: positional[1], Env: env, HostVersion: binaryVersion()}
	for _, name := range passEnv {
		if v, ok := os.LookupEnv(name); ok {
			req.Env = append(req.Env, name+"="+v)
		}
	}
	switch *params {
	case "":
	case "-":
		b, err := io.ReadAll(io.LimitReader(os.Stdin, lim.MaxRequestBytes+1))
		if err != nil {
			return usage("reading the params from stdin failed")
		}
		req.Params = b
	default:
		req.Params = json.RawMessage(*params)
	}
	req.Progress = func(stage string) { fmt.Fprintf(stderr, "open-conduit extension invoke: %s\n", stage) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	resp, err := runInvoke(ctx, req, lim)
	var ierr *invoke.Error
	if err != nil && !errors.As(err, &ierr) {
		ierr = invoke.Sentinel(invoke.CodePluginFailed)
	}
	if *asJSON {
		rep := invokeReport{OK: err == nil, Error: ierr}
		// A failed call's response holds no result, only what was counted.
		if err == nil || resp.StdoutBytes > 0 || resp.StderrBytes > 0 {
			rep.Response = &resp
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if eerr := enc.Encode(rep); eerr != nil {
			fmt.Fprintf(stderr, "open-conduit extension invoke: %v\n", eerr)
			return exitFail
		}
	} else if err == nil {
		out, _ := json.MarshalIndent(resp.Result, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
	}
	switch {
	case err == nil:
		return exitOK
	case !*asJSON:
		fmt.Fprintf(stderr, "open-conduit extension invoke: %v\n", err)
	}
	if ierr.Code == invoke.CodeInvalidInvocation {
		return exitUsage
	}
	return exitFail
}
