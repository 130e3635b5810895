package docker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/hemra-dev/hemra/dataset"
	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/sandbox/docker"
)

// countingClient counts image builds, to prove an unchanged task is not
// rebuilt.
type countingClient struct {
	*client.Client
	builds atomic.Int32
}

func (c *countingClient) ImageBuild(ctx context.Context, r io.Reader, o build.ImageBuildOptions) (build.ImageBuildResponse, error) {
	c.builds.Add(1)
	return c.Client.ImageBuild(ctx, r, o)
}

// harborTask writes a Harbor-format task whose image builds FROM base and
// returns it as the dataset package would load it.
func harborTask(t *testing.T, base, nonce string) *dataset.Task {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "hello")
	files := map[string]string{
		"task.toml":              "version = \"1.0\"\n[environment]\nworkdir = \"/app\"\n",
		"instruction.md":         "Write 42 to /app/answer.txt.\n",
		"environment/Dockerfile": "# a comment\nFROM " + base + " AS base\nRUN echo built > /built.txt\nFROM base\nWORKDIR /app\n",
		"environment/nonce.txt":  nonce,
		"tests/test.sh":          "#!/bin/sh\nLOGS=\"${HEMRA_VERIFIER_LOGS:-/logs/verifier}\"\nif [ \"$(cat /app/answer.txt)\" = 42 ] && [ -f /built.txt ]; then echo 1 > $LOGS/reward.txt; else echo 0 > $LOGS/reward.txt; fi\n",
		"solution/solve.sh":      "#!/bin/sh\necho 42 > /app/answer.txt\n",
	}
	task := &dataset.Task{Name: "hello", Kind: "harbor", Dir: dir, Config: &dataset.TaskConfig{Environment: dataset.EnvConfig{Workdir: "/app"}}}
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		mode := os.FileMode(0o644)
		if strings.HasSuffix(rel, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(content))
		f := dataset.File{Path: rel, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(content)), Mode: uint32(mode)}
		switch strings.SplitN(rel, "/", 2)[0] {
		case "environment":
			task.Environment = append(task.Environment, f)
		case "tests":
			task.Tests = append(task.Tests, f)
		case "solution":
			task.Solution = append(task.Solution, f)
		default:
			task.Other = append(task.Other, f)
		}
	}
	return task
}

// A Harbor task with an environment/Dockerfile: its image is built once,
// the oracle runs in it, and the verifier on the snapshot sees the agent's
// files and has no network. Building again finds the image by its hash.
func TestHarborTaskImageIsBuiltOnceAndVerifiedOnTheSnapshot(t *testing.T) {
	cli, _, base := engine(t)
	cc := &countingClient{Client: cli}
	p, err := docker.New(docker.Options{Client: cc, StopGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	task := harborTask(t, base, fmt.Sprint(time.Now().UnixNano()))
	b, err := docker.TaskBuild(ctx, docker.NewResolver(cli, nil), task)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.From) != 1 || !strings.HasPrefix(b.From[base], "sha256:") {
		t.Fatalf("FROM pins = %v, want %s pinned to its image ID (built locally, no repo digest)", b.From, base)
	}
	s := docker.TaskSettings(hardened(""), task)
	s.Image, s.Build = "", b

	agent := start(t, p, sandbox.Spec{Settings: s, Role: "agent"})
	id, err := p.FindTaskImage(ctx, b.Hash)
	if err != nil || id == "" {
		t.Fatalf("task image not found by its hash: %q %v", id, err)
	}
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), id, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	first, _ := cli.ImageInspect(ctx, id)

	if err := agent.Upload(ctx, filepath.Join(task.Dir, "solution"), "/solution"); err != nil {
		t.Fatal(err)
	}
	if r := run(t, agent, sandbox.ExecRequest{Command: []string{"sh", "/solution/solve.sh"}}, ""); r.code != 0 {
		t.Fatalf("solve.sh: %d %s", r.code, r.stderr)
	}
	snap, err := agent.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.RemoveSnapshot(context.Background(), snap) })
	agent.Stop(ctx)
	// The snapshot inherits the task image's labels, its build hash among
	// them: it is not the task image (another attempt would start from
	// this one's filesystem).
	if got, err := p.FindTaskImage(ctx, b.Hash); err != nil || got != id {
		t.Errorf("after a snapshot, the task image found by its hash is %q (%v), want %s", got, err, id)
	}

	ver := start(t, p, sandbox.Spec{Settings: s, Role: "verifier", Snapshot: snap})
	if err := ver.Upload(ctx, filepath.Join(task.Dir, "tests"), "/tests"); err != nil {
		t.Fatal(err)
	}
	r := run(t, ver, sh(`sh /tests/test.sh; cat /logs/verifier/reward.txt; nc -w 3 172.17.0.1 9 </dev/null 2>&1`), "")
	if !strings.HasPrefix(r.stdout, "1\n") || !strings.Contains(r.stdout, "Network is unreachable") {
		t.Errorf("verifier: %q %q; want reward 1 and no network", r.stdout, r.stderr)
	}

	// Unchanged task: a second start by a new provider (a later apply)
	// finds the image by its hash and builds nothing.
	before := cc.builds.Load()
	later, err := docker.New(docker.Options{Client: cc, StopGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	again := start(t, later, sandbox.Spec{Settings: s, Role: "agent"})
	again.Stop(ctx)
	if n := cc.builds.Load() - before; n != 0 {
		t.Errorf("unchanged task rebuilt %d times", n)
	}
	second, _ := cli.ImageInspect(ctx, id)
	if first.ID != second.ID || first.Created != second.Created {
		t.Errorf("task image changed: %s %s → %s %s", first.ID, first.Created, second.ID, second.Created)
	}
	if cc.builds.Load() != 1 {
		t.Errorf("%d builds for one task, want 1", cc.builds.Load())
	}

	// The image removed behind hemra's back: the next start rebuilds it.
	ver.Stop(ctx)
	if err := p.RemoveSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if p.SnapshotExists(ctx, snap) {
		t.Error("the snapshot exists after RemoveSnapshot")
	}
	if _, err := cli.ImageRemove(ctx, id, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
		t.Fatal(err)
	}
	start(t, later, sandbox.Spec{Settings: s, Role: "agent"}).Stop(ctx)
	if n := cc.builds.Load(); n != 2 {
		t.Errorf("%d builds after the task image was removed, want 2", n)
	}
	if id2, _ := p.FindTaskImage(ctx, b.Hash); id2 != "" {
		t.Cleanup(func() {
			cli.ImageRemove(context.Background(), id2, image.RemoveOptions{Force: true, PruneChildren: true})
		})
	}

	// A changed context file is a new hash, so a new image.
	task.Environment[0].SHA256 = strings.Repeat("0", 64)
	if b2, _ := docker.TaskBuild(ctx, docker.NewResolver(cli, nil), task); b2.Hash == b.Hash {
		t.Error("changing a context file kept the build hash")
	}
}

func TestComposeTasksAreRefused(t *testing.T) {
	task := &dataset.Task{Name: "multi", Kind: "harbor", Environment: []dataset.File{{Path: "environment/docker-compose.yaml"}}}
	_, err := docker.TaskBuild(context.Background(), nil, task)
	if !errors.Is(err, docker.ErrCompose) || !strings.Contains(err.Error(), "multi") {
		t.Errorf("compose task: %v, want ErrCompose naming the task", err)
	}
}

func TestFromRefs(t *testing.T) {
	refs, err := docker.FromRefs([]byte("ARG X=1\nFROM --platform=linux/amd64 python:3.12 AS build\nRUN x \\\n  y\nFROM scratch\n# FROM commented:1\nFROM build\nfrom alpine:3.20\nFROM python:3.12\n"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(refs, ",") != "python:3.12,alpine:3.20" {
		t.Errorf("refs = %v", refs)
	}
	if _, err := docker.FromRefs([]byte("ARG BASE\nFROM $BASE\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("FROM with a build argument: %v", err)
	}
}

// Tags resolve through the engine's distribution endpoint against a
// registry run here on 127.0.0.1; a new push under the tag is a new digest.
func TestResolveTagsThroughTheEngine(t *testing.T) {
	cli, _, base := engine(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/hemra/app:v1"
	push := func() string {
		img, err := random.Image(512, 1)
		if err != nil {
			t.Fatal(err)
		}
		tag, err := name.NewTag(ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(tag, img); err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		return d.String()
	}
	r := docker.NewResolver(cli, []string{"HOME=" + t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	d1 := push()
	got, err := r.Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if got != host+"/hemra/app@"+d1 {
		t.Errorf("Resolve = %s, want %s", got, host+"/hemra/app@"+d1)
	}
	d2 := push()
	if got, _ := r.Resolve(ctx, ref); got != host+"/hemra/app@"+d2 || d1 == d2 {
		t.Errorf("after a new push Resolve = %s, want digest %s", got, d2)
	}
	if got, _ := r.Resolve(ctx, host+"/hemra/app@"+d1); got != host+"/hemra/app@"+d1 {
		t.Errorf("a digest reference changed: %s", got)
	}
	if _, err := r.Resolve(ctx, host+"/hemra/missing:v1"); !errors.Is(err, docker.ErrNoSuchImage) {
		t.Errorf("missing tag: %v, want ErrNoSuchImage", err)
	}
	if _, err := r.Resolve(ctx, "127.0.0.1:1/hemra/app:v1"); !errors.Is(err, docker.ErrUnreachable) {
		t.Errorf("closed port: %v, want ErrUnreachable", err)
	}
	local, err := r.Resolve(ctx, base)
	if err != nil || !strings.HasPrefix(local, "sha256:") {
		t.Errorf("locally built image: %q %v, want its image ID", local, err)
	}
}

// The planner pins a tag as "name@<digest>"; for an image built here the
// digest is its image ID, which the provider runs as that ID.
func TestPinnedLocalImageRuns(t *testing.T) {
	cli, p, base := engine(t)
	insp, err := cli.ImageInspect(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	in := start(t, p, sandbox.Spec{Settings: hardened(base + "@" + insp.ID)})
	if r := run(t, in, sh("echo ok"), ""); r.stdout != "ok\n" {
		t.Errorf("got %q %q", r.stdout, r.stderr)
	}
}
