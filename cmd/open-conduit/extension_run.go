package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/extensions/agent"
	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/extensions/runner"
	"github.com/open-conduit/open-conduit/extensions/schedule"
	"github.com/open-conduit/open-conduit/extensions/shell"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// bundled are the packages the binary serves itself: a manifest whose
// command is exactly "open-conduit extension-run NAME" runs NAME here.
var bundled = map[string]func() *sdk.Extension{
	agent.Name:    agent.Extension,
	notes.Name:    notes.Extension,
	runner.Name:   runner.Extension,
	schedule.Name: schedule.Extension,
	shell.Name:    shell.Extension,
}

// bundledNames is the names of the bundled extensions, sorted.
func bundledNames() []string {
	names := make([]string, 0, len(bundled))
	for name := range bundled {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// serveExtension serves an extension on the process's stdin and stdout; a
// variable so tests can serve over pipes instead.
var serveExtension = sdk.Serve

// extensionRunCommand serves a bundled extension by name:
// open-conduit extension-run NAME. The protocol owns stdout from here on;
// only usage errors, before serving starts, are written to stderr.
func extensionRunCommand(args []string, stdout, stderr io.Writer) int {
	names := bundledNames()
	if len(args) != 1 {
		fmt.Fprintf(stderr, "usage: open-conduit extension-run NAME\nbundled extensions: %s\n", strings.Join(names, ", "))
		return exitUsage
	}
	ext, ok := bundled[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "open-conduit extension-run: no bundled extension %q (bundled: %s)\n", args[0], strings.Join(names, ", "))
		return exitUsage
	}
	if err := serveExtension(ext()); err != nil {
		fmt.Fprintf(stderr, "open-conduit extension-run %s: %v\n", args[0], err)
		return exitFail
	}
	return exitOK
}
