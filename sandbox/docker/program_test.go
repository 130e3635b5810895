package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/internal/sandboxbin"
	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/sandbox/docker"
)

// A program image is built by hemra from the static binary alone, FROM
// scratch, once per binary; a bare instance runs the program as its only
// process, hardened, with a read-only root, its mounts read-only, and no
// environment of hemra's.
func TestProgramImageAndBareInstance(t *testing.T) {
	cli, p, _ := engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := sandboxbin.Get(ctx, "hemra-judge", sandboxbin.Linux())
	if err != nil {
		t.Fatal(err)
	}
	id, err := p.EnsureProgramImage(ctx, bin.Name, bin.Path, bin.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	img, err := cli.ImageInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if img.Config.Labels[docker.LabelProgramSHA] != bin.SHA256 || len(img.RootFS.Layers) != 1 ||
		!strings.Contains(strings.Join(img.RepoTags, ","), docker.ProgramImageTag(bin.Name, bin.SHA256)) {
		t.Errorf("image %s: labels %v, layers %d, tags %v", id, img.Config.Labels, len(img.RootFS.Layers), img.RepoTags)
	}
	p2, _ := docker.New(docker.Options{Client: cli})
	if again, err := p2.EnsureProgramImage(ctx, bin.Name, bin.Path, bin.SHA256); err != nil || again != id {
		t.Errorf("a second provider built again: %s %v", again, err)
	}

	in := t.TempDir()
	os.WriteFile(filepath.Join(in, "job.json"), []byte(`{"rubric":{"criteria":[]}}`), 0o644)
	s := hardened(id)
	s.ReadOnly = true
	inst := start(t, p, sandbox.Spec{Settings: s, Role: "judge", OneCommand: true, Bare: true, Workspace: t.TempDir(),
		Mounts: []sandbox.Mount{{Source: in, Target: "/hemra/judge/in"}}})
	if err := inst.Upload(ctx, in, "/x"); err == nil {
		t.Errorf("a bare instance took an upload")
	}
	got := run(t, inst, sandbox.ExecRequest{Command: []string{docker.ProgramPath(bin.Name), "/hemra/judge/in/job.json"}}, "")
	if got.code != 0 || !strings.Contains(got.stdout, `"error_kind":"input"`) || !strings.Contains(got.stdout, "no criteria") {
		t.Errorf("the program said %q (exit %d, stderr %q)", got.stdout, got.code, got.stderr)
	}
	insp, err := cli.ContainerInspect(ctx, docker.ContainerID(inst))
	if err != nil {
		t.Fatal(err)
	}
	hc := insp.HostConfig
	if !hc.ReadonlyRootfs || hc.NetworkMode != "none" || strings.Join(hc.CapDrop, ",") != "ALL" || !strings.Contains(strings.Join(hc.SecurityOpt, ","), "no-new-privileges") ||
		hc.Memory == 0 || hc.PidsLimit == nil {
		t.Errorf("host config %+v", hc)
	}
	for _, m := range insp.Mounts {
		if m.RW {
			t.Errorf("mount %s is writable", m.Destination)
		}
	}
	for _, e := range insp.Config.Env {
		if !strings.HasPrefix(e, "PATH=") {
			t.Errorf("environment %q", e)
		}
	}
	if _, err := p.Start(ctx, sandbox.Spec{Settings: s, Bare: true, Env: map[string]string{"K": "v"}, OneCommand: true}); err == nil {
		t.Errorf("a bare instance took an environment")
	}
}
