package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/open-conduit/open-conduit/client"
)

const doctorDetails = `doctor asks the running daemon for its own checks (extensions: each package
started, its version, protocol and restarts; store: the database's integrity;
lock: the state lock is the daemon's) and runs every check its packages
declare, each with the read-only view of how the configuration uses that
package. A check's status is ok, info, warn or fail.

flags:
  --deep	run the packages' thorough checks (which may resolve secrets)
` + opsFlagsHelp + `Exit status: 0 when no check fails, 1 when one does or the daemon cannot be
reached, 2 for a usage error.
`

func doctorCommand(args []string, stdout, stderr io.Writer) int {
	o := newOps("doctor", stdout, stderr)
	var deep bool
	o.fs.BoolVar(&deep, "deep", false, "deep checks")
	if !o.parse(args, 0, 0) {
		return exitUsage
	}
	return o.call(func(ctx context.Context, c *client.Client) int {
		rep, err := c.Doctor(ctx, deep)
		if err != nil {
			return o.fail(err)
		}
		if code := o.print(rep, func(w *tabwriter.Writer) { printDoctorChecks(w, rep.Checks) }); code != exitOK {
			return code
		}
		if !rep.OK {
			fmt.Fprintf(stderr, "open-conduit doctor: %d checks failed\n", failed(rep))
			return exitFail
		}
		return exitOK
	})
}

// printDoctorChecks writes checks as doctor's table (doctor and the
// offline checks of config check).
func printDoctorChecks(w *tabwriter.Writer, checks []client.DoctorCheck) {
	fmt.Fprintln(w, "CHECK\tSTATUS\tCODE\tDETAIL")
	for _, ch := range checks {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", ch.Name, ch.Status, orDash(ch.Code), orDash(oneLine(ch.Detail, 160)))
		for _, item := range ch.Items {
			fmt.Fprintf(w, "  \t\t\t- %s\n", oneLine(item, 160))
		}
	}
}

func failed(rep client.DoctorReport) int {
	n := 0
	for _, c := range rep.Checks {
		if c.Status == client.CheckFail {
			n++
		}
	}
	return n
}
