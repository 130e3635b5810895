package executor_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/executor"
	"github.com/hemra-dev/hemra/planner"
	"github.com/hemra-dev/hemra/state"
)

// slowEval is an eval directory of n Harbor tasks and one harness that
// takes a while (sleeps while the file "slow" exists in the eval
// directory) and then solves the task.
func slowEval(t testing.TB, n int) string {
	dir := t.TempDir()
	files := map[string]string{
		"main.hcl": `variable "here" {
  type = string
}

sandbox "local" {
  kind = "local"
}

harness "slow" {
  command = ["sh", "${var.here}/slow.sh", var.here]
  sandbox = sandbox.local
}

dataset "d" {
  source = "./tasks"
}

eval "e" {
  dataset   = dataset.d
  harnesses = [harness.slow]
}
`,
		"slow.sh": hello + `
if [ -e "$1/slow" ]; then sleep "$(cat "$1/slow")"; fi
echo hello > "$HEMRA_WORKDIR/hello.txt"
echo '{"type":"event","kind":"log","data":{"level":"info","message":"solved"}}'
echo '{"type":"result","status":"ok","output":"done"}'
`,
		"slow": "0.3\n",
	}
	task := parseFiles(helloTask)
	for i := range n {
		for name, content := range task {
			files[strings.Replace(name, "tasks/hello/", fmt.Sprintf("tasks/t%02d/", i), 1)] = content
		}
	}
	writeFiles(t, dir, files)
	return dir
}

// buildHemra builds the hemra binary once per test.
func buildHemra(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hemra")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/hemra")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

var finishedLine = regexp.MustCompile(`\[(\d+)/\d+\]$`)

// TestCrashSafety SIGKILLs `hemra apply` at several points of a run, then
// applies again until done: every address ends with exactly one current,
// finished attempt; the attempts killed in flight are in its history as
// interrupted; the store passes its consistency check.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hemra and runs it several times")
	}
	const n = 10
	bin := buildHemra(t)
	dir := slowEval(t, n)
	e := newEnv(t, dir)
	e.hcl = []string{"here=" + dir}

	// Kill points: as the first attempt starts, after 3 finished attempts
	// (of this run), after 2 more.
	points := []int{0, 3, 2}
	for _, k := range points {
		cmd := exec.Command(bin, "-chdir", dir, "apply", "-auto-approve", "-parallelism", "2", "-var", "here="+dir)
		cmd.Env = append(os.Environ(), "NO_COLOR=1")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		seen := 0
		killed := false
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if k == 0 && strings.HasSuffix(line, ": agent") || k > 0 && finishedLine.MatchString(line) && func() bool { seen++; return seen >= k }() {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				killed = true
				break
			}
		}
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("apply ended before kill point %d", k)
		}
		// The store is consistent after each kill, and readable by plan.
		checkStore(t, e.store, false)
		plan, _ := e.plan()
		if plan.Summary.Retry == 0 && plan.Summary.Run == 0 {
			t.Fatalf("after a kill, plan has nothing to retry or run: %+v", plan.Summary)
		}
	}

	// A clean apply finishes the job.
	rep, _ := e.apply(context.Background(), 4)
	for _, a := range rep.Attempts {
		if a.Class != state.ClassPassed {
			t.Errorf("%s: %s %s", a.Address, a.Class, a.Error)
		}
	}
	plan, _ := e.plan()
	if plan.Summary.Changes() {
		t.Fatalf("plan after the final apply has changes: %+v", plan.Summary)
	}
	checkStore(t, e.store, true)
}

// checkStore asserts the store is consistent; with done, that every
// address has exactly one current attempt, finished and passed, and that
// no attempt is left open.
func checkStore(t *testing.T, dir string, done bool) {
	t.Helper()
	st, err := state.Open(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := st.Check()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("store problems: %v", rep.Problems)
	}
	if !done {
		return
	}
	currents := 0
	err = st.ForEachCurrent(func(addr string, c state.Current) error {
		currents++
		if c.Status != state.StatusFinished || c.Class != state.ClassPassed {
			t.Errorf("%s: current is %s/%s", addr, c.Status, c.Class)
		}
		hist, err := st.History(addr)
		if err != nil {
			return err
		}
		for _, a := range hist[:len(hist)-1] {
			if !a.Status().Terminal() {
				t.Errorf("%s: older attempt %s left %s", addr, a.ID, a.Status())
			}
		}
		return nil
	})
	if err != nil || currents != 10 {
		t.Fatalf("%d current attempts (%v), want 10", currents, err)
	}
}

// TestInterrupt cancels an apply while attempts run: the running ones are
// recorded as interrupted, the queued ones never start, and the next plan
// retries the first and runs the second.
func TestInterrupt(t *testing.T) {
	dir := slowEval(t, 6)
	writeFiles(t, dir, map[string]string{"slow": "30\n"})
	e := newEnv(t, dir)
	e.hcl = []string{"here=" + dir}
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	started := 0
	var mu sync.Mutex
	e.opts.Events = nil
	e.opts.Protocol.CancelGrace = 300 * time.Millisecond
	e.onEvent = func(ev executor.Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Type == executor.EventAttemptStage && ev.Stage == state.StatusAgent {
			started++
			if started == 2 {
				// Give the harnesses time to say hello.
				once.Do(func() { time.AfterFunc(500*time.Millisecond, cancel) })
			}
		}
	}
	rep, _ := e.apply(ctx, 2)
	if !rep.Interrupted {
		t.Fatal("report does not say the apply was interrupted")
	}
	if len(rep.Attempts) != 2 {
		t.Fatalf("%d attempts ran, want the 2 that had started", len(rep.Attempts))
	}
	for _, a := range rep.Attempts {
		if a.Class != state.ClassInterrupted {
			t.Errorf("%s: %s, want interrupted", a.Address, a.Class)
		}
	}
	plan, _ := e.plan()
	if plan.Summary.Retry != 2 || plan.Summary.Run != 4 {
		t.Fatalf("plan after the interrupt: %+v, want 2 to retry and 4 to run", plan.Summary)
	}
	for _, pa := range plan.Attempts {
		if pa.Action == planner.ActionRetry && pa.Action.Symbol() != "!" {
			t.Errorf("retry shown as %q", pa.Action.Symbol())
		}
	}
	writeFiles(t, dir, map[string]string{"slow": "0\n"})
	rep, _ = e.apply(context.Background(), 3)
	if len(rep.Attempts) != 6 || rep.InfraErrors() > 0 {
		t.Fatalf("the retry apply ran %d attempts", len(rep.Attempts))
	}
}
