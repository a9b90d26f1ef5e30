// Command open-conduit is the Open Conduit binary.
//
// Usage:
//
//	open-conduit COMMAND [ARGS]
//	open-conduit help [COMMAND]
//
// `open-conduit help` lists the commands (the table in commands below);
// `open-conduit help COMMAND` or `open-conduit COMMAND --help` prints one
// command's usage. Exit status: 0 when the command succeeded, 1 when what it
// checked failed, 2 for a usage error (an unknown command included).
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// command is one entry of the binary's command table.
type command struct {
	// name is the words that select the command, such as "extension certify".
	name string
	// args is the synopsis after the name, such as "[--json] PATH".
	args string
	// summary is the one line shown in the command list.
	summary string
	// details, when set, follows the synopsis in the command's own usage
	// (flags, exit status): the text `--help` prints.
	details string
	// ownHelp says the command parses its own flags and answers --help and
	// -h itself: with one usage on stdout and exit status 0. The dispatcher
	// then passes a help request through as run(["--help"], …).
	ownHelp bool
	// run executes the command with the words after its name.
	run func(args []string, stdout, stderr io.Writer) int
}

// commands is the binary's command table: dispatch, the command list and
// every usage are read from it.
//
// To add a command, add one entry here (keep the list sorted by name): its
// name path, the synopsis of its arguments, a one-line summary and the
// function. Nothing else needs to change: `open-conduit help`, `help NAME`,
// `NAME --help` and TestEveryCommandAnswersHelp pick it up. A command that
// parses flags with the flag package sets ownHelp and answers -h/--help
// itself (usage on stdout, exit 0); otherwise put its flags in details and
// the dispatcher answers for it.
var commands = []command{
	{
		name:    "config apply",
		args:    "[flags] FILE",
		summary: "apply a configuration to the running daemon",
		details: "The daemon validates FILE whole; a refused one changes nothing (every problem is listed)\nand the running generation keeps serving.\n\nflags:\n" + opsFlagsHelp + opsExitHelp,
		run:     configApplyCommand,
	},
	{
		name:    "config check",
		args:    "[--config DIR] [--json]",
		summary: "check a configuration offline: no daemon, no store",
		details: configCheckDetails,
		run:     configCheckCommand,
	},
	{
		name:    "config show",
		args:    "[flags]",
		summary: "print the running configuration, secrets redacted",
		details: "flags:\n" + opsFlagsHelp + opsExitHelp,
		run:     configShowCommand,
	},
	{
		name:    "config validate",
		args:    "[flags] FILE",
		summary: "check a configuration against the running daemon",
		details: "Exit status 1 also when FILE is invalid; every problem is listed with its JSON path.\n\nflags:\n" + opsFlagsHelp + opsExitHelp,
		run:     configValidateCommand,
	},
	{
		name:    "doctor",
		args:    "[--deep] [flags]",
		summary: "run the daemon's checks and every check its packages declare",
		details: doctorDetails,
		run:     doctorCommand,
	},
	{
		name:    "drill list",
		args:    "[--json]",
		summary: "list the fault drills built into this binary, with the crash-table row each drills",
		details: "flags:\n  --json\tprint the list as JSON\n",
		run:     drillListCommand,
	},
	{
		name:    "drill run",
		args:    "[--keep] [-v] [--json] NAME",
		summary: "replay one embedded fault drill against this binary, with a step-by-step log",
		details: drillRunDetails,
		run:     drillRunCommand,
	},
	{
		name:    "drill soak",
		args:    "[--rounds N] [--senders N] [--seed N] [--kill-points LIST] [--json]",
		summary: "kill -9 the daemon under webhook load, round after round, and count what was lost or duplicated",
		details: drillSoakDetails,
		run:     drillSoakCommand,
	},
	{
		name:    "events",
		args:    "[--scope ID] [--after SEQ] [--limit N] [--follow] [flags]",
		summary: "list accepted events, or follow new ones",
		details: "--follow prints the events after SEQ and then each new one as it is accepted, until interrupted\n(with --json, one event per line).\n\nflags:\n" + opsFlagsHelp + opsExitHelp,
		run:     eventsCommand,
	},
	{
		name:    "extension bundle",
		args:    "[--json] DIR",
		summary: "write the release layout: a copy of this binary and its bundled packages beside it",
		details: extensionBundleDetails,
		run:     extensionBundleCommand,
	},
	{
		name:    "extension certify",
		args:    "[flags] DIR",
		summary: "certify a package over the wire",
		ownHelp: true,
		run:     certifyCommand,
	},
	{
		name:    "extension inspect",
		args:    "[flags] NAME|DIR",
		summary: "show a package's manifest in words: surfaces, methods, permissions, schemas, digest",
		details: "NAME is an installed or bundled package; DIR a package directory.\n\nflags:\n" + pkgFlagsHelp + opsExitHelp,
		run:     extensionInspectCommand,
	},
	{
		name:    "extension install",
		args:    "[--yes] [flags] SOURCE",
		summary: "install a package from a directory or a .tar.gz, after showing what it may do",
		details: extensionInstallDetails,
		run:     extensionInstallCommand,
	},
	{
		name:    "extension invoke",
		args:    "[flags] DIR METHOD",
		summary: "run a package for exactly one call without a daemon, under hard limits",
		details: invokeDetails,
		run:     invokeCommand,
	},
	{
		name:    "extension list",
		args:    "[flags]",
		summary: "list the installed and bundled packages, with the running daemon's state",
		details: "Works without a daemon; when one answers, each package's state and restarts are its.\n\nflags:\n" + pkgFlagsHelp + opsExitHelp,
		run:     extensionListCommand,
	},
	{
		name:    "extension remove",
		args:    "[--force] [flags] NAME",
		summary: "remove an installed package (a bundled one of its name comes back)",
		details: "Refused while the configuration (the file, and the running daemon's generation) uses the\npackage's types, listing where, or when the bundled release it brings back could not run on\nthe KV layout the store records (kv_downgrade), unless --force.\n\nflags:\n  --force\tremove it even so\n" + pkgFlagsHelp + pkgExitHelp,
		run:     extensionRemoveCommand,
	},
	{
		name:    "extension rollback",
		args:    "[--yes] [flags] NAME",
		summary: "go back to the package's previous release",
		details: "Refused (kv_downgrade) once the newer release migrated KV: restore a backup of the state\ndirectory taken before the update, or install the newer release again.\n\nflags:\n" + pkgChangeHelp + pkgFlagsHelp + pkgExitHelp,
		run:     extensionRollbackCommand,
	},
	{
		name:    "extension update",
		args:    "[--yes] [flags] SOURCE",
		summary: "install a newer release of an installed package; a running daemon migrates it",
		details: "Refused (kv_downgrade) when SOURCE's kv_version is below the KV layout the store records.\nThe running daemon stops the old process before the new one starts and migrates KV in its\nconfigure; the release it replaces is kept for rollback.\n\nflags:\n" + pkgChangeHelp + pkgFlagsHelp + pkgExitHelp,
		run:     extensionUpdateCommand,
	},
	{
		name:    "extension validate",
		args:    "[--json] PATH",
		summary: "check a manifest offline",
		details: `PATH is an extension directory holding open-conduit-extension.json, or a
manifest file. Exit status: 0 when the manifest is valid, 1 when it is not,
2 for a usage error.

flags:
  --json	print the report as JSON
`,
		run: validateCommand,
	},
	{
		name:    "extension-run",
		args:    "NAME",
		summary: "serve a bundled extension on stdin and stdout",
		details: "NAME is one of the extensions built into this binary: " + strings.Join(bundledNames(), ", ") + `.
A manifest whose command is "open-conduit extension-run NAME" runs it.
`,
		run: extensionRunCommand,
	},
	{
		name:    "route trace",
		args:    "--scope ID (--sample NAME | --event FILE) [flags]",
		summary: "show how each route of a scope would decide an event; writes nothing",
		details: "FILE is a JSON event: {\"source\":…, \"family\":…, \"type\":…, \"payload\":…}. A sample is one the\nscope's routes offer.\n\nflags:\n" + opsFlagsHelp + opsExitHelp,
		run:     routeTraceCommand,
	},
	{
		name:    "serve",
		args:    "[--config DIR] [--state DIR] [--log-format text|json]",
		summary: "run the daemon",
		// serve's own -h handling printed the usage on stderr too (the flag
		// package's Usage runs before Parse returns ErrHelp); the
		// dispatcher answers for it.
		details: serveDetails,
		run:     serveCommand,
	},
	{
		name:    "status",
		args:    "[flags]",
		summary: "show the running daemon: generation, readiness, paths, packages",
		details: "flags:\n" + opsFlagsHelp + opsExitHelp,
		run:     statusCommand,
	},
	{
		name:    "toolbelt call",
		args:    "[--request-id ID] OPERATION [INPUT]",
		summary: "call a toolbelt operation from a run (its endpoint and token from the environment)",
		details: toolbeltCallDetails,
		run:     toolbeltCallCommand,
	},
	{
		name:    "version",
		summary: "print the build's protocol versions",
		run:     versionCommand,
	},
	{
		name:    "waits",
		args:    "[--scope ID] [--after WORK] [--limit N] [flags]",
		summary: "list what work is waiting for",
		details: "flags:\n" + opsFlagsHelp + opsExitHelp,
		run:     waitsCommand,
	},
	{
		name:    "work",
		args:    "[--scope ID] [--work-state STATE] [--after WORK] [--limit N] [flags] [ID]",
		summary: "list work, or show one work with its display, wait and executions",
		details: "flags:\n" + opsFlagsHelp + opsExitHelp,
		run:     workCommand,
	},
	{
		name:    "work cancel",
		args:    "[--reason TEXT] [flags] ID",
		summary: "cancel a work that has not ended (its wait, and a running attempt through its executor)",
		details: "A work that has already ended is refused (conflict).\n\nflags:\n" + opsFlagsHelp + opsExitHelp,
		run:     workCancelCommand,
	},
}

func versionCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprint(stderr, "open-conduit version: takes no arguments\nusage: open-conduit version\n")
		return exitUsage
	}
	fmt.Fprintf(stdout, "open-conduit protocol %v\n", protocol.SupportedVersions())
	return exitOK
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage())
		return exitUsage
	}
	if isHelpWord(args[0]) {
		return helpCommand(args[1:], stdout, stderr)
	}
	cmd, rest, ok := lookup(args)
	if !ok {
		return unknownCommand(args, stderr)
	}
	if helpRequested(rest) {
		return printHelp(cmd, stdout, stderr)
	}
	return cmd.run(rest, stdout, stderr)
}

// helpCommand is `open-conduit help [COMMAND]`.
func helpCommand(words []string, stdout, stderr io.Writer) int {
	if len(words) == 0 {
		fmt.Fprint(stdout, topUsage())
		return exitOK
	}
	cmd, rest, ok := lookup(words)
	if !ok {
		return unknownCommand(words, stderr)
	}
	if len(rest) != 0 {
		fmt.Fprintf(stderr, "open-conduit help: unknown command %q\n\n%s", strings.Join(words, " "), topUsage())
		return exitUsage
	}
	return printHelp(cmd, stdout, stderr)
}

// printHelp prints cmd's usage on stdout.
func printHelp(cmd command, stdout, stderr io.Writer) int {
	if cmd.ownHelp {
		return cmd.run([]string{"--help"}, stdout, stderr)
	}
	fmt.Fprint(stdout, commandUsage(cmd))
	return exitOK
}

// unknownCommand answers words that name no command: the words, then the
// commands that share their first word, or the whole list.
func unknownCommand(words []string, stderr io.Writer) int {
	group := groupOf(words[0])
	if len(group) == 0 {
		fmt.Fprintf(stderr, "open-conduit: unknown command %q\n\n%s", words[0], topUsage())
		return exitUsage
	}
	if len(words) == 1 {
		fmt.Fprintf(stderr, "open-conduit %s: missing subcommand\n\n", words[0])
	} else {
		fmt.Fprintf(stderr, "open-conduit: unknown command %q\n\n", words[0]+" "+words[1])
	}
	fmt.Fprint(stderr, "commands:\n")
	printList(stderr, group)
	return exitUsage
}

// lookup finds the command whose name is the longest prefix of words and
// returns the words after it.
func lookup(words []string) (command, []string, bool) {
	best := -1
	for i, c := range commands {
		n := strings.Fields(c.name)
		if len(n) <= len(words) && equalWords(n, words[:len(n)]) && (best < 0 || len(n) > len(strings.Fields(commands[best].name))) {
			best = i
		}
	}
	if best < 0 {
		return command{}, nil, false
	}
	return commands[best], words[len(strings.Fields(commands[best].name)):], true
}

func equalWords(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// groupOf is the commands whose name has more than one word and begins
// with first: the commands "open-conduit first" could have meant.
func groupOf(first string) []command {
	var group []command
	for _, c := range commands {
		if n := strings.Fields(c.name); len(n) > 1 && n[0] == first {
			group = append(group, c)
		}
	}
	return group
}

// isHelpWord reports whether word asks for help in the command's place.
func isHelpWord(word string) bool {
	return word == "help" || word == "-h" || word == "-help" || word == "--help"
}

// helpRequested reports whether args ask for the command's usage: a -h or
// --help before any "--".
func helpRequested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "-h" || a == "-help" || a == "--help" {
			return true
		}
	}
	return false
}

// topUsage is the list of commands.
func topUsage() string {
	var b strings.Builder
	b.WriteString("usage: open-conduit COMMAND [ARGS]\n\ncommands:\n")
	printList(&b, commands)
	b.WriteString("\nRun \"open-conduit help COMMAND\" or \"open-conduit COMMAND --help\" for a command's usage.\n")
	return b.String()
}

// printList writes one line per command: its synopsis and summary.
func printList(w io.Writer, list []command) {
	width := 0
	for _, c := range list {
		width = max(width, len(synopsis(c)))
	}
	for _, c := range list {
		fmt.Fprintf(w, "  %-*s   %s\n", width, synopsis(c), c.summary)
	}
}

func synopsis(c command) string {
	if c.args == "" {
		return c.name
	}
	return c.name + " " + c.args
}

// commandUsage is one command's usage, as --help prints it.
func commandUsage(c command) string {
	s := "usage: open-conduit " + synopsis(c) + "\n\n" + strings.ToUpper(c.summary[:1]) + c.summary[1:] + ".\n"
	if c.details != "" {
		s += "\n" + c.details
	}
	return s
}
