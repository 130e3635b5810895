package sandboxtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/internal/testimages"
	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/sandbox/docker"
	"github.com/hemra-dev/hemra/sandbox/sandboxtest"
)

// TestDockerConformance runs the suite on the real engine (skipped when
// none answers, unless HEMRA_TEST_DOCKER=1).
func TestDockerConformance(t *testing.T) {
	cli := testimages.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ref, err := testimages.EnsureBusybox(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	p, err := docker.New(docker.Options{Client: cli, StopGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.Run(t, sandboxtest.Config{
		Provider: p,
		Settings: sandbox.Settings{Kind: "docker", Image: ref, Network: "none", Memory: 256 << 20, CPUs: 1, Pids: 64},
	})
}
