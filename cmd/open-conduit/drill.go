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
	"text/tabwriter"

	"github.com/open-conduit/open-conduit/scenarios/drill"
)

const drillRunDetails = `Replays one fault drill embedded in this binary against this binary: a
temporary work directory with its own config and state, the daemon started,
killed and restarted as the drill says. With -v each step is printed as it
is taken and the whole step-by-step log at the end (a failing drill always
prints its log). "open-conduit drill list" names the drills.

flags:
  --keep	keep the work directory (config, state, the daemon's log) and print its path
  -v	print every step
  --json	print the result as JSON
Exit status: 0 when the drill passed, 1 when it failed (or was skipped:
it needs a faultinject build), 2 for a usage error.
`

const drillSoakDetails = `Loads a daemon with signed webhooks from several senders while it is
killed with SIGKILL at random moments (and, on a faultinject build, at each
kill point in turn) and restarted, round after round; one delivery in eight
also makes Work whose run calls notes.add through the toolbelt under a
request ID, retried under the same ID when a kill cuts it short. Then checks
that every webhook answered 2xx is in the store, none was accepted twice,
every acknowledged operation's effect happened exactly once, and the store
passes its integrity check. Prints a line per round and the counts.

flags:
  --rounds N	how many kills (default 200)
  --senders N	concurrent senders (default 4)
  --seed N	the seed of the kill moments (default random, printed)
  --kill-points LIST	comma-separated OPEN_CONDUIT_KILL_POINT values (NAME or
		NAME:N) for every other round, killed from inside (a faultinject
		build only; its default is the points a webhook passes)
  --json	print the report as JSON
Exit status: 0 when nothing was lost or duplicated and no operation's effect
happened twice, 1 otherwise, 2 for a usage error.
`

// drillBinary is the executable the drills start: this one.
func drillBinary() (string, error) { return os.Executable() }

func drillListCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("drill list", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprintf(stderr, "open-conduit drill list: takes only --json\nusage: open-conduit drill list [--json]\n")
		return exitUsage
	}
	drills, err := drill.List()
	if err != nil {
		fmt.Fprintf(stderr, "open-conduit drill list: %v\n", err)
		return exitFail
	}
	if *asJSON {
		return drillJSON(stdout, stderr, map[string]any{"drills": drills})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROW\tNEEDS")
	for _, d := range drills {
		needs := d.Needs
		if needs == "" {
			needs = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", d.Name, d.Row, needs)
	}
	tw.Flush()
	return exitOK
}

func drillRunCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("drill run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	keep := fs.Bool("keep", false, "keep the work directory")
	verbose := fs.Bool("v", false, "print every step")
	asJSON := fs.Bool("json", false, "print JSON")
	name, err := parseInterspersed(fs, args)
	if err != nil || len(name) != 1 {
		if err == nil {
			err = errors.New("one drill NAME is required")
		}
		fmt.Fprintf(stderr, "open-conduit drill run: %v\nusage: open-conduit drill run [--keep] [-v] [--json] NAME\n", err)
		return exitUsage
	}
	bin, err := drillBinary()
	if err != nil {
		fmt.Fprintf(stderr, "open-conduit drill run: %v\n", err)
		return exitFail
	}
	opts := drill.RunOptions{Options: drill.Options{Binary: bin}, Keep: *keep, Verbose: *verbose}
	if *verbose && !*asJSON {
		opts.Progress = stderr
		fmt.Fprintf(stderr, "drill %s: running\n", name[0])
	}
	res, err := drill.Run(name[0], opts)
	if errors.Is(err, drill.ErrNoDrill) {
		fmt.Fprintf(stderr, "open-conduit drill run: %v\n", err)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "open-conduit drill run: %v\n", err)
		return exitFail
	}
	if *asJSON {
		if code := drillJSON(stdout, stderr, res); code != exitOK {
			return code
		}
	} else {
		if *verbose || !res.Passed {
			fmt.Fprint(stdout, res.Log)
		}
		if res.WorkDir != "" {
			fmt.Fprintf(stdout, "work directory kept: %s\n", res.WorkDir)
		}
		verdict := "PASS"
		switch {
		case res.Skipped:
			verdict = "SKIP"
		case !res.Passed:
			verdict = "FAIL"
		}
		fmt.Fprintf(stdout, "%s %s (%.1fs)\n", verdict, res.Name, res.Elapsed)
	}
	if !res.Passed || res.Skipped {
		return exitFail
	}
	return exitOK
}

func drillSoakCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("drill soak", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	rounds := fs.Int("rounds", 200, "rounds")
	senders := fs.Int("senders", 4, "senders")
	seed := fs.Uint64("seed", 0, "seed")
	points := fs.String("kill-points", "", "kill points")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || *rounds <= 0 || *senders <= 0 {
		if err == nil {
			err = errors.New("--rounds and --senders are positive; no arguments")
		}
		fmt.Fprintf(stderr, "open-conduit drill soak: %v\nusage: open-conduit drill soak [--rounds N] [--senders N] [--seed N] [--kill-points LIST] [--json]\n", err)
		return exitUsage
	}
	bin, err := drillBinary()
	if err != nil {
		fmt.Fprintf(stderr, "open-conduit drill soak: %v\n", err)
		return exitFail
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	opts := drill.SoakOptions{Binary: bin, Rounds: *rounds, Senders: *senders, Seed: *seed, Progress: stderr}
	switch {
	case *points != "":
		opts.KillPoints = strings.Split(*points, ",")
	case drill.HasKillPoints(bin):
		opts.KillPoints = drill.DefaultKillPoints
	}
	rep, err := drill.Soak(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "open-conduit drill soak: %v\n", err)
		return exitFail
	}
	if *asJSON {
		if code := drillJSON(stdout, stderr, rep); code != exitOK {
			return code
		}
	} else {
		fmt.Fprintf(stdout, "seed %d, %d rounds, %d senders: %d kills from outside, %d at kill points\n",
			rep.Seed, rep.Rounds, rep.Senders, rep.Kills, rep.KillPointKills)
		fmt.Fprintf(stdout, "sent %d: %d acknowledged, %d refused, %d without an answer\n", rep.Sent, rep.Acknowledged, rep.Refused, rep.NoAnswer)
		fmt.Fprintf(stdout, "deliveries acknowledged %d, stored %d, lost %d; events %d, duplicated %d; integrity %s\n",
			rep.Deliveries, rep.Stored, rep.Lost, rep.Events, rep.Duplicated, rep.Integrity)
		fmt.Fprintf(stdout, "operations: %d Works (%d settled, %d retried), %d acknowledged, %d effects, %d lost, %d twice\n",
			rep.OpWorks, rep.OpSettled, rep.OpRetried, rep.OpAcknowledged, rep.OpEffects, rep.OpLost, rep.OpTwice)
		for _, u := range rep.Unexpected {
			fmt.Fprintf(stdout, "unexpected: %s\n", u)
		}
		verdict := "ok"
		if !rep.Passed() {
			verdict = "FAIL"
		}
		fmt.Fprintf(stdout, "%s (%.1fs)\n", verdict, rep.Elapsed)
	}
	if !rep.Passed() {
		return exitFail
	}
	return exitOK
}

// parseInterspersed parses flags that may come before or after the
// positional arguments and returns those.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func drillJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "open-conduit: %v\n", err)
		return exitFail
	}
	return exitOK
}
