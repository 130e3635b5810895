package sandboxtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/internal/k8stest"
	"github.com/hemra-dev/hemra/internal/testimages"
	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/sandbox/docker"
	"github.com/hemra-dev/hemra/sandbox/kubernetes"
	"github.com/hemra-dev/hemra/sandbox/sandboxtest"
)

// TestKubernetesConformance runs the suite on the real cluster (skipped
// when none answers, unless HEMRA_TEST_K8S=1): the busybox test image is
// pushed to an in-process registry the cluster pulls from. The pods ask
// for a twentieth of a CPU, so that tests running at once fit on a small
// node (requests are limits).
func TestKubernetesConformance(t *testing.T) {
	kubeconfig := k8stest.Kubeconfig(t)
	cli := testimages.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ref, err := testimages.EnsureBusybox(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	insp, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	dp, err := docker.New(docker.Options{Client: cli})
	if err != nil {
		t.Fatal(err)
	}
	p := kubernetes.New(kubernetes.Options{Docker: dp, StopGrace: 2 * time.Second})
	settings := sandbox.Settings{Kind: kubernetes.Kind, Image: insp.ID, Network: "none", Memory: 128 << 20, CPUs: 0.05,
		Kubernetes: &sandbox.Kubernetes{Kubeconfig: kubeconfig, Namespace: k8stest.Namespace(t, kubeconfig), Registry: k8stest.Registry(t) + "/hemra-test"}}
	sandboxtest.Run(t, sandboxtest.Config{Provider: p, Settings: settings})
}
