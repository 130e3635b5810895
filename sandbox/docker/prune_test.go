package docker_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/sandbox/docker"
)

func TestMain(m *testing.M) {
	if img := os.Getenv("HEMRA_TEST_PRUNE_CHILD"); img != "" {
		pruneChild(img)
		return
	}
	os.Exit(m.Run())
}

// pruneChild plays a hemra that starts a container and is then killed.
func pruneChild(img string) {
	p, err := docker.New(docker.Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	in, err := p.Start(context.Background(), sandbox.Spec{Settings: hardened(img), AttemptID: os.Getenv("HEMRA_TEST_PRUNE_ATTEMPT"), Address: "prune/child/task#1", Role: "agent"})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("started", docker.ContainerID(in))
	time.Sleep(2 * time.Minute)
	os.Exit(0)
}

// `doctor -prune` removes the containers of a hemra killed with SIGKILL,
// and nothing else: not an unlabelled container, not a container labelled
// by someone else, not a container of a hemra still running.
func TestPruneRemovesOnlyWhatAKilledHemraLeft(t *testing.T) {
	cli, p, img := engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	attempt := fmt.Sprintf("prune-%d", time.Now().UnixNano())
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), "HEMRA_TEST_PRUNE_CHILD="+img, "HEMRA_TEST_PRUNE_ATTEMPT="+attempt)
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "started ") {
		child.Process.Kill()
		t.Fatalf("child: %q", line)
	}
	leftover := strings.TrimSpace(strings.TrimPrefix(line, "started "))
	child.Process.Signal(os.Kill)
	child.Wait()

	other := func(labels map[string]string) string {
		c, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"sleep", "60"}, Labels: labels}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })
		return c.ID
	}
	unlabelled := other(nil)
	foreign := other(map[string]string{"com.example.owner": "someone", docker.LabelAttempt: "not-ours"})
	mine := start(t, p, sandbox.Spec{Settings: hardened(img), Role: "agent"})

	rep, err := p.Prune(ctx, docker.PruneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	removed := map[string]bool{}
	for _, r := range rep.Removed {
		if r.Error != "" {
			t.Errorf("removing %s: %s", r.ID, r.Error)
		}
		removed[r.ID] = true
	}
	if !removed[leftover[:12]] {
		t.Errorf("the killed hemra's container %s was not removed: %+v", leftover[:12], rep)
	}
	for what, id := range map[string]string{"unlabelled": unlabelled, "foreign": foreign, "running hemra's": docker.ContainerID(mine)} {
		if removed[id[:12]] {
			t.Errorf("the %s container was removed", what)
		}
		if _, err := cli.ContainerInspect(ctx, id); err != nil {
			t.Errorf("the %s container is gone: %v", what, err)
		}
	}
	if _, err := cli.ContainerInspect(ctx, leftover); err == nil {
		t.Error("the leftover container still exists")
	}
}
