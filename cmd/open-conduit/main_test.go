package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(withBinaryCleanup(m), map[string]func(){
		"open-conduit": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the txtar scripts in testdata/script against the binary.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			examples, err := filepath.Abs("../../protocol/testdata")
			env.Setenv("EXAMPLES", examples)
			return err
		},
	})
}
