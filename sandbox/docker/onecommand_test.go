package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/sandbox/docker"
)

// A OneCommand instance runs its command as the container's main process;
// the values of its environment still reach it exactly, and neither the
// container's configuration nor a snapshot committed from it holds one.
func TestOneCommandEnvironmentStaysOutOfTheConfiguration(t *testing.T) {
	cli, p, img := engine(t)
	secret := "s3cr3t value with 'quotes' \"double\" $HOME `tick` \\back\\slash\\n and\na newline\n"
	in := start(t, p, sandbox.Spec{Settings: hardened(img), Role: "agent", OneCommand: true, Workspace: t.TempDir(),
		Env: map[string]string{"FROM_SPEC": "spec"}})
	if docker.ContainerID(in) != "" {
		t.Fatal("a OneCommand instance has a container before its command")
	}
	req := sh(`printf '%s|' "$SECRET" "$EMPTY" "$FROM_SPEC" "$(id -u)" "$(pwd)"; read line; echo "stdin:$line"; echo kept > /app/kept.txt`)
	req.Env = map[string]string{"SECRET": secret, "EMPTY": ""}
	req.Dir = "/tmp"
	got := run(t, in, req, "ping\n")
	want := secret + "|" + "|spec|0|/tmp|stdin:ping\n"
	if got.stdout != want || got.code != 0 {
		t.Fatalf("the command saw\n%q (exit %d, stderr %q)\nwant\n%q", got.stdout, got.code, got.stderr, want)
	}
	id := docker.ContainerID(in)
	insp, err := cli.ContainerInspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range insp.Config.Env {
		if strings.Contains(e, "s3cr3t") || strings.HasPrefix(e, "SECRET=") || strings.HasPrefix(e, "FROM_SPEC=") {
			t.Errorf("the container's configuration holds %q", e)
		}
	}
	if strings.Contains(strings.Join(insp.Args, " "), "s3cr3t") || strings.Contains(insp.Path, "s3cr3t") {
		t.Error("the container's arguments hold a value")
	}
	ref, err := in.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.RemoveSnapshot(context.Background(), ref)
	img2, err := cli.ImageInspect(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range img2.Config.Env {
		if strings.Contains(e, "s3cr3t") || strings.HasPrefix(e, "SECRET=") {
			t.Errorf("the snapshot's configuration holds %q", e)
		}
	}
	// The verifier on the snapshot sees the agent's file.
	v := start(t, p, sandbox.Spec{Settings: hardened(img), Role: "verifier", Snapshot: ref, OneCommand: true, Workspace: t.TempDir()})
	if got := run(t, v, sh(`cat /app/kept.txt; echo "[$SECRET]"`), ""); got.stdout != "kept\n[]\n" {
		t.Errorf("the verifier saw %q", got.stdout)
	}
	// One command only.
	if _, err := in.Exec(context.Background(), sh("true")); err == nil || !strings.Contains(err.Error(), "one command") {
		t.Errorf("a second Exec: %v", err)
	}
}

// Uploads made before the command land before it starts; the command's
// background processes end with it (the container stops); what it wrote
// is read back and the container is removed.
func TestOneCommandUploadsLeftoversAndStop(t *testing.T) {
	cli, p, img := engine(t)
	in := start(t, p, sandbox.Spec{Settings: hardened(img), Role: "verifier", OneCommand: true, Workspace: t.TempDir()})
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "test.sh"), []byte("echo tested > /logs/verifier/reward.txt\n"), 0o755)
	if err := in.Upload(context.Background(), src, "/tests"); err != nil {
		t.Fatal(err)
	}
	if err := in.Upload(context.Background(), filepath.Join(src, "missing"), "/tests"); err == nil {
		t.Error("uploading a missing file before the command: no error")
	}
	got := run(t, in, sh(`sh /tests/test.sh; sleep 300 >/dev/null 2>&1 & echo started`), "")
	if got.stdout != "started\n" || got.code != 0 {
		t.Fatalf("got %+v", got)
	}
	insp, err := cli.ContainerInspect(context.Background(), docker.ContainerID(in))
	if err != nil {
		t.Fatal(err)
	}
	if insp.State.Running {
		t.Error("the container still runs after its command ended (a background process kept it)")
	}
	dst := filepath.Join(t.TempDir(), "verifier")
	if err := in.Download(context.Background(), "/logs/verifier", dst); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "reward.txt")); string(b) != "tested\n" {
		t.Errorf("reward.txt: %q", b)
	}
	if err := in.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ContainerInspect(context.Background(), docker.ContainerID(in)); err == nil {
		t.Error("the container is still there after Stop")
	}
}

// An instance that runs nothing (nop) is still snapshotted and read back.
func TestOneCommandWithoutACommand(t *testing.T) {
	_, p, img := engine(t)
	in := start(t, p, sandbox.Spec{Settings: hardened(img), Role: "agent", OneCommand: true, Workspace: t.TempDir()})
	ref, err := in.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.RemoveSnapshot(context.Background(), ref)
	if err := in.Download(context.Background(), "/logs/artifacts", filepath.Join(t.TempDir(), "a")); err != nil {
		t.Fatal(err)
	}
}

// A read-only OneCommand container: uploads land in its writable folders
// before the command starts, as the root user or as another one (which
// takes the sleep-and-exec path to open the working directory).
func TestOneCommandReadOnly(t *testing.T) {
	_, p, img := engine(t)
	for _, user := range []string{"", "1000:1000"} {
		s := hardened(img)
		s.ReadOnly, s.User = true, user
		in := start(t, p, sandbox.Spec{Settings: s, Role: "verifier", OneCommand: true, Workspace: t.TempDir()})
		src := t.TempDir()
		os.WriteFile(filepath.Join(src, "test.sh"), []byte("echo from-tests\n"), 0o644)
		if err := in.Upload(context.Background(), src, "/tests"); err != nil {
			t.Fatal(err)
		}
		got := run(t, in, sh(`sh /tests/test.sh && echo hi > /app/f && cat /app/f && ! touch /etc/x 2>/dev/null && id -u`), "")
		want := "from-tests\nhi\n0\n"
		if user != "" {
			want = "from-tests\nhi\n1000\n"
		}
		if got.stdout != want {
			t.Errorf("user %q: got %+v, want stdout %q", user, got, want)
		}
	}
}

// An agent that will be snapshotted keeps its log folders in the
// container: they are read back, and the verifier on the snapshot (one
// commit) sees them.
func TestWillSnapshotKeepsTheLogsInTheSnapshot(t *testing.T) {
	_, p, img := engine(t)
	s := hardened(img)
	s.User = "1000:1000"
	in := start(t, p, sandbox.Spec{Settings: s, Role: "agent", OneCommand: true, WillSnapshot: true, Workspace: t.TempDir()})
	if got := run(t, in, sh(`echo log > /logs/agent/a.txt && echo art > /logs/artifacts/b.txt && echo w > /app/c.txt && id -u`), ""); got.stdout != "1000\n" {
		t.Fatalf("agent: %+v", got)
	}
	ref, err := in.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.RemoveSnapshot(context.Background(), ref)
	dst := filepath.Join(t.TempDir(), "artifacts")
	if err := in.Download(context.Background(), "/logs/artifacts", dst); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "b.txt")); string(b) != "art\n" {
		t.Errorf("artifact: %q", b)
	}
	v := start(t, p, sandbox.Spec{Settings: s, Role: "verifier", Snapshot: ref, OneCommand: true, Workspace: t.TempDir()})
	got := run(t, v, sh(`cat /logs/agent/a.txt /logs/artifacts/b.txt /app/c.txt && echo 1 > /logs/verifier/reward.txt`), "")
	if got.stdout != "log\nart\nw\n" || got.code != 0 {
		t.Errorf("the verifier saw %+v", got)
	}
}
