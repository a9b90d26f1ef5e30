package runner_test

import (
	"os"
	"testing"

	"github.com/open-conduit/open-conduit/extensions/runner"
	"github.com/open-conduit/open-conduit/internal/executortest"
)

// executor is runner as the executor test kit drives it.
var executor = executortest.Executor{
	Name:        runner.Name,
	Extension:   runner.Extension,
	MetaFile:    runner.MetaFile,
	InputFile:   runner.InputFile,
	LiveOutputs: []string{runner.OutputFile},
	ChildEnv:    "RUNNER_TEST_CHILD",
	StopGrace:   &runner.StopGrace,
}

func TestMain(m *testing.M) {
	// Run by the host as "open-conduit extension-run runner" would be, or by
	// a test as the executor's child process: serve, and exit.
	executortest.ServeChild(executor)
	os.Exit(m.Run())
}
