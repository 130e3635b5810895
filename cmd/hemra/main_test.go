package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"hemra": func() { os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())) },
	})
}

// TestScripts runs the CLI scripts in testdata/script, each a terminal
// session against the real binary.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("HEMRA_TEST_DOCKER", os.Getenv("HEMRA_TEST_DOCKER"))
			return nil
		},
	})
}
