package state_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
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

// childFailed reports err to the parent test, which reads the child's
// lines ("error: ..." fails its expectation), and fails the child itself.
func childFailed(t *testing.T, err error) {
	t.Helper()
	fmt.Println("error:", err)
	t.Fatal(err)
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
			childFailed(t, err)
		}
		a, err := st.CurrentAttempt("e/h/t#1")
		if err != nil {
			childFailed(t, err)
		}
		fmt.Println("read", a.ID, a.Status())
	case "writer":
		// Take the writer lock, start an attempt, report, and wait to be
		// killed.
		st, err := state.Open(dir, state.Options{Writer: true, Command: "hemra apply"})
		if err != nil {
			childFailed(t, err)
		}
		done := statetest.Attempt("e/h/done#1", "fp")
		running := statetest.Attempt("e/h/running#1", "fp")
		for _, a := range []*state.Attempt{done, running} {
			if err := st.AddAttempt(a); err != nil {
				childFailed(t, err)
			}
		}
		_ = st.Finish(done.ID, state.StatusFinished, &state.Outcome{Class: state.ClassPassed})
		_ = st.Transition(running.ID, state.Transition{Status: state.StatusAgent})
		fmt.Println("ready", running.ID)
		time.Sleep(time.Minute)
	case "churn":
		// Write without pause, from several goroutines, until killed (or a
		// minute has passed).
		st, err := state.Open(dir, state.Options{Writer: true, LockTimeout: 10 * time.Second})
		if err != nil {
			childFailed(t, err)
		}
		if _, err := st.RecoverInterrupted(); err != nil {
			childFailed(t, err)
		}
		fmt.Println("ready")
		deadline := time.Now().Add(time.Minute)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(deadline); i++ {
					a := statetest.Attempt(fmt.Sprintf("e/h/t%d-%d#1", g, i%20), "fp")
					sha, _ := st.PutBlob([]byte(fmt.Sprint("blob ", g, " ", i)))
					a.Manifest.Inputs = append(a.Manifest.Inputs, state.Input{Stage: "agent", Path: "x", Blob: sha})
					if st.AddAttempt(a) != nil || st.Transition(a.ID, state.Transition{Status: state.StatusAgent}) != nil ||
						st.Finish(a.ID, state.StatusFinished, &state.Outcome{Class: state.ClassPassed}) != nil {
						return
					}
				}
			}()
		}
		wg.Wait()
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

	// A reader (hemra plan) sees the running apply without taking its lock.
	r, err := state.Open(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if info, ok := r.WriterActive(); !ok || info.PID != cmd.Process.Pid || info.Command != "hemra apply" {
		t.Errorf("WriterActive while the writer lives = %+v, %v; want pid %d (hemra apply)", info, ok, cmd.Process.Pid)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// The killed writer's details are still in writer.lock; nobody holds it.
	if info, ok := r.WriterActive(); ok {
		t.Errorf("WriterActive after the writer was killed = %+v, want none", info)
	}
	w, err := state.Open(dir, state.Options{Writer: true})
	if err != nil {
		t.Fatalf("opening after the writer was killed: %v", err)
	}
	defer w.Close()
	// A writer in this very process (apply planning under its own lock) is
	// not another apply.
	if info, ok := r.WriterActive(); ok {
		t.Errorf("WriterActive with this process's own writer = %+v, want none", info)
	}
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

// TestKilledWriterAnyPoint kills a writer that writes without pause, at a
// different moment each round, and checks that every time the next writer
// finds a consistent store: no half-written record, every attempt ended or
// recovered as interrupted, and Check clean.
func TestKilledWriterAnyPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 6 processes")
	}
	dir := t.TempDir()
	var lineage string
	var serial uint64
	for round := range 6 {
		cmd := child(t, "churn", dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "ready\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: writer process said %q, %v", round, line, err)
		}
		// Vary where in its work the writer dies.
		time.Sleep(time.Duration(20+37*round) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()

		w, err := state.Open(dir, state.Options{Writer: true})
		if err != nil {
			t.Fatalf("round %d: opening after the kill: %v", round, err)
		}
		if _, err := w.RecoverInterrupted(); err != nil {
			t.Fatalf("round %d: RecoverInterrupted: %v", round, err)
		}
		m, _ := w.Meta()
		if lineage != "" && m.Lineage != lineage || m.Serial < serial {
			t.Errorf("round %d: meta %+v after lineage %s serial %d", round, m, lineage, serial)
		}
		lineage, serial = m.Lineage, m.Serial
		rep, err := w.Check()
		if err != nil || len(rep.Problems) != 0 {
			t.Errorf("round %d: Check: %+v, %v", round, rep.Problems, err)
		}
		err = w.ForEachCurrent(func(addr string, c state.Current) error {
			if !c.Status.Terminal() {
				t.Errorf("round %d: %s is %s after recovery", round, addr, c.Status)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		t.Logf("round %d: %d attempts, %d blobs, %d orphan blobs, serial %d", round, rep.Attempts, rep.Blobs, len(rep.OrphanBlobs), m.Serial)
	}
}
