package local_test

import (
	"os"
	"testing"

	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/sandbox/local"
	"github.com/hemra-dev/hemra/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Config{
		Provider: local.NewWithOptions(local.Options{Path: os.Getenv("PATH")}),
		Settings: sandbox.Settings{Kind: "local"},
	})
}
