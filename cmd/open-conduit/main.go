// Command open-conduit is the Open Conduit binary.
//
// Usage:
//
//	open-conduit extension validate [--json] PATH
//	open-conduit extension certify [flags] DIR
//	open-conduit extension-run NAME
//	open-conduit version
//
// PATH is an extension directory holding open-conduit-extension.json, or a
// manifest file. Exit status: 0 when the command succeeded, 1 when what it
// checked failed, 2 for a usage error.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/open-conduit/open-conduit/protocol"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `usage:
  open-conduit extension validate [--json] PATH   check a manifest offline
  open-conduit extension certify [flags] DIR      certify a package over the wire (--help for flags)
  open-conduit extension-run NAME                 serve a bundled extension on stdin and stdout
  open-conduit version                            print the build's protocol versions
`

func run(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) >= 2 && args[0] == "extension" && args[1] == "validate":
		return validateCommand(args[2:], stdout, stderr)
	case len(args) >= 2 && args[0] == "extension" && args[1] == "certify":
		return certifyCommand(args[2:], stdout, stderr)
	case len(args) >= 1 && args[0] == "extension-run":
		return extensionRunCommand(args[1:], stdout, stderr)
	case len(args) == 1 && args[0] == "version":
		fmt.Fprintf(stdout, "open-conduit protocol %v\n", protocol.SupportedVersions())
		return exitOK
	case len(args) == 1 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help"):
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
}
