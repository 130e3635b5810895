package state_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/state"
	"github.com/hemra-dev/hemra/state/statetest"
)

func TestConformance(t *testing.T) {
	statetest.Run(t, func(t *testing.T, dir string, opts state.Options) (*state.Store, error) {
		return state.Open(dir, opts)
	})
}

// The child-process tests run this test binary again with HEMRA_STATE_CHILD
// set; TestChild then plays the other process.
const childEnv = "HEMRA_STATE_CHILD"

func child(t *testing.T, role, dir string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), childEnv+"="+role, "HEMRA_STATE_CHILD_DIR="+dir)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestChild is the other process of the tests below; it does nothing in a
// normal test run.
func TestChild(t *testing.T) {
	role, dir := os.Getenv(childEnv), os.Getenv("HEMRA_STATE_CHILD_DIR")
	switch role {
	case "":
		t.Skip("only runs as the child of another test")
	case "reader":
		// Read the current attempt while the parent holds the writer lock.
		st, err := state.Open(dir, state.Options{})
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		a, err := st.CurrentAttempt("e/h/t#1")
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println("read", a.ID, a.Status())
	case "writer":
		// Take the writer lock, start an attempt, report, and wait to be
		// killed.
		st, err := state.Open(dir, state.Options{Writer: true, Command: "hemra apply"})
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		done := statetest.Attempt("e/h/done#1", "fp")
		running := statetest.Attempt("e/h/running#1", "fp")
		for _, a := range []*state.Attempt{done, running} {
			if err := st.AddAttempt(a); err != nil {
				fmt.Println("error:", err)
				return
			}
		}
		_ = st.Finish(done.ID, state.StatusFinished, &state.Outcome{Class: state.ClassPassed})
		_ = st.Transition(running.ID, state.Transition{Status: state.StatusAgent})
		fmt.Println("ready", running.ID)
		time.Sleep(time.Minute)
	}
}

func TestReaderInAnotherProcessWhileWriterHoldsLock(t *testing.T) {
	dir := t.TempDir()
	w, err := state.Open(dir, state.Options{Writer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	a := statetest.Attempt("e/h/t#1", "fp")
	if err := w.AddAttempt(a); err != nil {
		t.Fatal(err)
	}
	if err := w.Transition(a.ID, state.Transition{Status: state.StatusVerify}); err != nil {
		t.Fatal(err)
	}
	out, err := child(t, "reader", dir).Output()
	if err != nil {
		t.Fatalf("reader process: %v", err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if got, want := first, "read "+a.ID+" verify"; got != want {
		t.Errorf("reader process printed %q, want %q", got, want)
	}
}

// TestKilledWriter kills a writer process with SIGKILL while an attempt is
// running, and checks what the next writer finds: the lock free, the
// finished attempt kept, the running one marked interrupted.
func TestKilledWriter(t *testing.T) {
	dir := t.TempDir()
	cmd := child(t, "writer", dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready ") {
		t.Fatalf("writer process said %q, %v", line, err)
	}
	runningID := strings.TrimSpace(strings.TrimPrefix(line, "ready "))

	// While it lives, it holds the lock.
	_, err = state.Open(dir, state.Options{Writer: true})
	var locked *state.ErrLocked
	if !errors.As(err, &locked) || locked.PID != cmd.Process.Pid {
		t.Fatalf("second writer got %v, want locked by pid %d", err, cmd.Process.Pid)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	w, err := state.Open(dir, state.Options{Writer: true})
	if err != nil {
		t.Fatalf("opening after the writer was killed: %v", err)
	}
	defer w.Close()
	n, err := w.RecoverInterrupted()
	if err != nil || n != 1 {
		t.Fatalf("RecoverInterrupted = %d, %v; want 1", n, err)
	}
	got, err := w.CurrentAttempt("e/h/running#1")
	if err != nil || got.ID != runningID || got.Status() != state.StatusInterrupted {
		t.Errorf("the running attempt is %+v (%v), want %s interrupted", got, err, runningID)
	}
	done, err := w.CurrentAttempt("e/h/done#1")
	if err != nil || done.Status() != state.StatusFinished || done.Outcome.Class != state.ClassPassed {
		t.Errorf("the finished attempt is %+v (%v), want it kept as finished", done, err)
	}
	rep, err := w.Check()
	if err != nil || len(rep.Problems) != 0 {
		t.Errorf("Check after the kill: %+v, %v", rep, err)
	}
}
