package local_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/sandbox/local"
)

// A process on the host cannot have anything bound into it: the local
// sandbox refuses per-instance mounts rather than silently drop them.
func TestSpecMountsAreRefused(t *testing.T) {
	p := local.NewWithOptions(local.Options{})
	_, err := p.Start(context.Background(), sandbox.Spec{
		Settings:  sandbox.Settings{Kind: "local"},
		Workspace: t.TempDir(),
		Mounts:    []sandbox.Mount{{Source: "/tmp", Target: "/hemra/mcp"}},
	})
	if err == nil || !strings.Contains(err.Error(), "/hemra/mcp") {
		t.Fatalf("err = %v", err)
	}
}
