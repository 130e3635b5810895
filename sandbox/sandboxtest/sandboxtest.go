// Package sandboxtest is the conformance suite every sandbox provider
// passes: the behaviour the executor and the harness protocol rely on,
// checked through the sandbox.Provider interface alone, with commands run
// by /bin/sh inside the sandbox. A provider's own tests call Run with a
// real instance of it (the Docker provider against the real engine).
package sandboxtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/sandbox"
)

// Config says which provider to check and with what settings (an image
// with /bin/sh for container providers).
type Config struct {
	Provider sandbox.Provider
	Settings sandbox.Settings
	// Gaps names checks a provider is known not to pass yet, with why;
	// they are skipped with that reason so the gap stays visible.
	Gaps map[string]string
	// OneCommand starts the instances of the checks that run one command
	// with sandbox.Spec.OneCommand, as the executor does.
	OneCommand bool
}

// Run runs the whole suite as subtests.
func Run(t *testing.T, c Config) {
	for _, check := range []struct {
		name string
		fn   func(*testing.T, Config)
	}{
		{"Paths", testPaths},
		{"Environment", testEnvironment},
		{"ExitCodeAndStreams", testExitCodeAndStreams},
		{"Stdin", testStdin},
		{"Terminate", testTerminate},
		{"Kill", testKill},
		{"LeftoversDieWithTheCommand", testLeftovers},
		{"UploadDownload", testUploadDownload},
		{"Snapshot", testSnapshot},
	} {
		t.Run(check.name, func(t *testing.T) {
			if why, ok := c.Gaps[check.name]; ok {
				t.Skip("known gap: " + why)
			}
			check.fn(t, c)
		})
	}
}

// Start starts an instance for a test and stops it when the test ends.
func Start(t *testing.T, c Config, spec sandbox.Spec) sandbox.Instance {
	t.Helper()
	spec.Settings = c.Settings
	spec.OneCommand = c.OneCommand
	if spec.Workspace == "" {
		spec.Workspace = t.TempDir()
	}
	if spec.AttemptID == "" {
		spec.AttemptID = "conformance"
	}
	if spec.Role == "" {
		spec.Role = "agent"
	}
	if err := c.Provider.Validate(c.Settings); err != nil {
		t.Fatalf("the provider refuses the suite's settings: %v", err)
	}
	inst, err := c.Provider.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Stop(context.Background()) })
	return inst
}

// Output is how a command ended.
type Output struct {
	Stdout, Stderr string
	Code           int
}

// PathEnv is what the executor passes every command: the HEMRA_* folder
// variables set to the instance's paths.
func PathEnv(p sandbox.Paths) map[string]string {
	return map[string]string{
		"HEMRA_WORKDIR":       p.Workdir,
		"HEMRA_AGENT_LOGS":    p.AgentLogs,
		"HEMRA_VERIFIER_LOGS": p.VerifierLogs,
		"HEMRA_TESTS_DIR":     p.Tests,
		"HEMRA_SOLUTION_DIR":  p.Solution,
		"HEMRA_ARTIFACTS_DIR": p.Artifacts,
	}
}

// Sh runs a /bin/sh script to its end, reading its streams while it runs,
// with env plus the HEMRA_* folder variables, as the executor runs one.
func Sh(t *testing.T, inst sandbox.Instance, script string, env map[string]string) Output {
	t.Helper()
	all := PathEnv(inst.Paths())
	for k, v := range env {
		all[k] = v
	}
	proc, err := inst.Exec(context.Background(), sandbox.ExecRequest{Command: []string{"sh", "-c", script}, Env: all, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return collect(t, proc)
}

func collect(t *testing.T, proc sandbox.Process) Output {
	t.Helper()
	errc := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(proc.Stderr()); errc <- b }()
	out, _ := io.ReadAll(proc.Stdout())
	stderr := <-errc
	code, err := proc.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return Output{string(out), string(stderr), code}
}

func testPaths(t *testing.T, c Config) {
	inst := Start(t, c, sandbox.Spec{})
	p := inst.Paths()
	for name, v := range map[string]string{"Workdir": p.Workdir, "AgentLogs": p.AgentLogs, "VerifierLogs": p.VerifierLogs, "Tests": p.Tests, "Solution": p.Solution, "Artifacts": p.Artifacts} {
		if v == "" {
			t.Errorf("Paths().%s is empty", name)
		}
	}
	out := Sh(t, inst, `pwd; echo "$HEMRA_WORKDIR"; echo "$HEMRA_AGENT_LOGS"; echo "$HEMRA_VERIFIER_LOGS"; echo "$HEMRA_TESTS_DIR"; echo "$HEMRA_SOLUTION_DIR"; echo "$HEMRA_ARTIFACTS_DIR"
test -d "$HEMRA_WORKDIR" && test -d "$HEMRA_AGENT_LOGS" && test -d "$HEMRA_VERIFIER_LOGS" && test -d "$HEMRA_ARTIFACTS_DIR" && echo folders-exist`, nil)
	want := strings.Join([]string{p.Workdir, p.Workdir, p.AgentLogs, p.VerifierLogs, p.Tests, p.Solution, p.Artifacts, "folders-exist"}, "\n") + "\n"
	if out.Stdout != want {
		t.Errorf("working directory, HEMRA_* variables and folders:\n got %q\nwant %q", out.Stdout, want)
	}
}

func testEnvironment(t *testing.T, c Config) {
	t.Setenv("HEMRA_CONFORMANCE_HOST_ONLY", "must-not-leak")
	inst := Start(t, c, sandbox.Spec{Env: map[string]string{"FROM_SPEC": "spec", "BOTH": "spec"}})
	out := Sh(t, inst, `echo "$FROM_SPEC $FROM_REQUEST $BOTH"; env`, map[string]string{"FROM_REQUEST": "request", "BOTH": "request"})
	first, rest, _ := strings.Cut(out.Stdout, "\n")
	if first != "spec request request" {
		t.Errorf("spec and request variables: %q, want %q", first, "spec request request")
	}
	if strings.Contains(rest, "must-not-leak") || strings.Contains(rest, "HEMRA_CONFORMANCE_HOST_ONLY") {
		t.Errorf("a variable of hemra's own environment reached the command:\n%s", rest)
	}
}

func testExitCodeAndStreams(t *testing.T, c Config) {
	inst := Start(t, c, sandbox.Spec{})
	out := Sh(t, inst, `echo to-stdout; echo to-stderr >&2; exit 3`, nil)
	if out.Code != 3 || out.Stdout != "to-stdout\n" || out.Stderr != "to-stderr\n" {
		t.Errorf("got %+v", out)
	}
}

func testStdin(t *testing.T, c Config) {
	inst := Start(t, c, sandbox.Spec{})
	proc, err := inst.Exec(context.Background(), sandbox.ExecRequest{Command: []string{"sh", "-c", `read line; echo "got $line"; cat >/dev/null; echo eof`}, Stdin: true, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if proc.Stdin() == nil {
		t.Fatal("Stdin() is nil with ExecRequest.Stdin")
	}
	if _, err := io.WriteString(proc.Stdin(), "ping\n"); err != nil {
		t.Fatal(err)
	}
	if err := proc.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	if out := collect(t, proc); out.Stdout != "got ping\neof\n" {
		t.Errorf("stdout %q", out.Stdout)
	}
}

// started runs a script that prints "ready" once its traps are set.
func started(t *testing.T, inst sandbox.Instance, script string) sandbox.Process {
	t.Helper()
	proc, err := inst.Exec(context.Background(), sandbox.ExecRequest{Command: []string{"sh", "-c", script}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("ready\n"))
	if _, err := io.ReadFull(proc.Stdout(), buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("the script did not start: %q %v", buf, err)
	}
	return proc
}

func testTerminate(t *testing.T, c Config) {
	inst := Start(t, c, sandbox.Spec{})
	proc := started(t, inst, `trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.1; done`)
	if err := proc.Terminate(); err != nil {
		t.Fatal(err)
	}
	out := collect(t, proc)
	if out.Code != 7 || out.Stdout != "got-term\n" {
		t.Errorf("after Terminate: %+v; want the TERM trap's exit 7", out)
	}
}

func testKill(t *testing.T, c Config) {
	inst := Start(t, c, sandbox.Spec{})
	proc := started(t, inst, `trap '' TERM; echo ready; while :; do sleep 0.1; done`)
	_ = proc.Terminate() // ignored by the script
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	if out := collect(t, proc); out.Code != 137 {
		t.Errorf("after Kill: exit %d, want 137 (SIGKILL)", out.Code)
	}
}

// testLeftovers: a background child does not outlive the command that
// started it, seen from inside the sandbox.
func testLeftovers(t *testing.T, c Config) {
	c.OneCommand = false // it looks from a second command
	inst := Start(t, c, sandbox.Spec{})
	out := Sh(t, inst, `sleep 300 >/dev/null 2>&1 & echo $!`, nil)
	pid, err := strconv.Atoi(strings.TrimSpace(out.Stdout))
	if err != nil {
		t.Fatalf("child pid: %q", out.Stdout)
	}
	check := Sh(t, inst, fmt.Sprintf(`if kill -0 %d 2>/dev/null && ! grep -q '^State:.*Z' /proc/%d/status 2>/dev/null; then echo alive; kill -9 %d; else echo gone; fi`, pid, pid, pid), nil)
	if strings.TrimSpace(check.Stdout) != "gone" {
		t.Errorf("background child %d outlived its command", pid)
	}
}

func testUploadDownload(t *testing.T, c Config) {
	inst := Start(t, c, sandbox.Spec{})
	p := inst.Paths()
	src := t.TempDir()
	mustWrite(t, filepath.Join(src, "run.sh"), "#!/bin/sh\necho uploaded-script\n", 0o755)
	mustWrite(t, filepath.Join(src, "data", "input.txt"), "input\n", 0o644)
	if err := inst.Upload(context.Background(), src, p.Tests); err != nil {
		t.Fatal(err)
	}
	// One command, so that the check holds for OneCommand instances too.
	out := Sh(t, inst, `"$HEMRA_TESTS_DIR/run.sh"; cat "$HEMRA_TESTS_DIR/data/input.txt"
mkdir -p out/sub && echo result > out/sub/result.txt && ln -s /etc/passwd out/passwd`, nil)
	if out.Stdout != "uploaded-script\ninput\n" {
		t.Errorf("after Upload: %+v", out)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if err := inst.Download(context.Background(), p.Workdir+"/out", dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "sub", "result.txt")); err != nil || string(b) != "result\n" {
		t.Errorf("downloaded result.txt: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "passwd")); err == nil {
		t.Error("Download copied a symlink")
	}
}

func testSnapshot(t *testing.T, c Config) {
	inst := Start(t, c, sandbox.Spec{})
	Sh(t, inst, `echo "agent was here" > state.txt`, nil)
	ref, err := inst.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ref == "" {
		t.Fatal("Snapshot returned an empty reference")
	}
	if r, ok := c.Provider.(interface {
		RemoveSnapshot(context.Context, string) error
	}); ok {
		t.Cleanup(func() { _ = r.RemoveSnapshot(context.Background(), ref) })
	}
	verifier := Start(t, c, sandbox.Spec{Snapshot: ref, Role: "verifier"})
	out := Sh(t, verifier, `cat "$HEMRA_WORKDIR/state.txt"`, nil)
	if out.Stdout != "agent was here\n" {
		t.Errorf("the verifier on the snapshot sees %+v", out)
	}
}

func mustWrite(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}
