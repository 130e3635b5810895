package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// signalEval writes an eval whose local program harness runs script (sh)
// on each of n tasks, one attempt each.
func signalEval(t *testing.T, n int, script string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("harness.sh", script, 0o755)
	write("main.hcl", fmt.Sprintf(`sandbox "local" {
  kind = "local"
}
harness "stubborn" {
  command = ["sh", %q, %q]
  sandbox = sandbox.local
}
dataset "tasks" {
  source = "./tasks"
}
eval "e" {
  dataset   = dataset.tasks
  harnesses = [harness.stubborn]
}
`, filepath.Join(dir, "harness.sh"), dir), 0o644)
	for i := range n {
		task := fmt.Sprintf("tasks/t%d/", i)
		write(task+"task.toml", "", 0o644)
		write(task+"instruction.md", "Wait.\n", 0o644)
		write(task+"tests/test.sh", "#!/bin/sh\necho 1 > \"$HEMRA_VERIFIER_LOGS/reward.txt\"\n", 0o755)
	}
	return dir
}

// startChild starts hemra ARGS in its own process, stdout to out.
func startChild(t *testing.T, dir string, stdout *os.File, stderr *bytes.Buffer, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHemraChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), "HEMRA_CHILD_ARGS="+strings.Join(append([]string{"-chdir", dir, "-no-color"}, args...), "\x1f"))
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd
}

func waitFiles(t *testing.T, paths ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range paths {
		for {
			if data, err := os.ReadFile(p); err == nil && len(bytes.TrimSpace(data)) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never appeared", p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: the state follows the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

func readPid(t *testing.T, path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestSecondInterruptKillsLocalHarnesses: a harness that ignores SIGTERM,
// and the child it started, do not outlive hemra when a second Ctrl-C
// stops it at once: hemra sends SIGKILL to every process group it started
// before it exits.
func TestSecondInterruptKillsLocalHarnesses(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	dir := signalEval(t, 1, `trap '' TERM INT
echo $$ > "$1/leader.pid"
sleep 300 &
echo $! > "$1/child.pid"
echo '{"type":"hello","protocol":"hemra.protocol/1"}'
while :; do sleep 1; done
`)
	var stderr bytes.Buffer
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	cmd := startChild(t, dir, out, &stderr, "apply", "-auto-approve")
	leader, child := filepath.Join(dir, "leader.pid"), filepath.Join(dir, "child.pid")
	waitFiles(t, leader, child)
	pids := []int{readPid(t, leader), readPid(t, child)}

	cmd.Process.Signal(os.Interrupt)
	time.Sleep(doubleSignal + 300*time.Millisecond) // a second press, not the same one relayed
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("hemra did not stop after a second Ctrl-C; stderr:\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d, want 130; stderr:\n%s", code, stderr.String())
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("process %d (which ignores SIGTERM) outlived hemra's second Ctrl-C", pid)
		}
	}
}

// TestClosedStdoutStopsGracefully: `hemra apply -json | head -c N` closes
// hemra's stdout mid-apply. hemra must treat it as one Ctrl-C (stop
// starting, cancel the running attempt, record everything) and exit 1,
// not die of SIGPIPE leaving the run "running".
func TestClosedStdoutStopsGracefully(t *testing.T) {
	dir := signalEval(t, 4, `echo '{"type":"hello","protocol":"hemra.protocol/1"}'
read line
touch "$1/started"
sleep 2
echo '{"type":"result","status":"ok","output":"done"}'
`)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := startChild(t, dir, w, &stderr, "apply", "-json", "-auto-approve", "-parallelism", "1")
	w.Close()
	// Read the first event, as head would, then go away.
	first, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || !strings.Contains(first, `"run.start"`) {
		t.Fatalf("first line %q, %v", first, err)
	}
	// An attempt is running when the reader goes.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no attempt started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("hemra did not stop after its stdout closed; stderr:\n%s", stderr.String())
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		t.Fatalf("hemra was killed by %v; stderr:\n%s", ws.Signal(), stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit %d, want 1; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stdout was closed") {
		t.Errorf("stderr does not say why it stopped:\n%s", stderr.String())
	}
	code, out := runChild(t, dir, "runs")
	if code != 0 || !strings.Contains(out, "interrupted") || strings.Contains(out, "running") {
		t.Errorf("runs after a closed stdout (want the run interrupted, none running):\n%s", out)
	}
	_, list := runChild(t, dir, "state", "list")
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if line != "" && !strings.Contains(line, "finished") && !strings.Contains(line, "interrupted") {
			t.Errorf("an attempt was left open: %s", line)
		}
	}
	if code, out := runChild(t, dir, "state", "check"); code != 0 {
		t.Errorf("state check: %d\n%s", code, out)
	}
	if _, out := runChild(t, dir, "plan"); !strings.Contains(out, "to run") {
		t.Errorf("the next plan does not run what was left:\n%s", out)
	}
}
