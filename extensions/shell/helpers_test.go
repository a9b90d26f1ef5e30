package shell_test

import (
	"os"
	"testing"

	"github.com/open-conduit/open-conduit/extensions/shell"
	"github.com/open-conduit/open-conduit/internal/executortest"
)

// executor is shell as the executor test kit drives it.
var executor = executortest.Executor{
	Name:        shell.Name,
	Extension:   shell.Extension,
	MetaFile:    shell.MetaFile,
	InputFile:   shell.InputFile,
	LiveOutputs: []string{shell.StdoutFile, shell.StderrFile},
	ChildEnv:    "SHELL_TEST_CHILD",
	StopGrace:   &shell.StopGrace,
}

func TestMain(m *testing.M) {
	// Run by the host as "open-conduit extension-run shell" would be, or by
	// a test as the executor's child process: serve, and exit.
	executortest.ServeChild(executor)
	os.Exit(m.Run())
}
