package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hemra-dev/hemra/state"
	"github.com/hemra-dev/hemra/state/statetest"
)

// TestStateCommandsWhileWriterHoldsLock runs the read commands while a
// writer (an apply, here played by the state API) holds the store.
func TestStateCommandsWhileWriterHoldsLock(t *testing.T) {
	dir := t.TempDir()
	w, err := state.Open(filepath.Join(dir, ".hemra"), state.Options{Writer: true, Command: "hemra apply"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	a := statetest.Attempt("baseline/agent/hello#1", "fp")
	if err := w.AddAttempt(a); err != nil {
		t.Fatal(err)
	}
	if err := w.Transition(a.ID, state.Transition{Status: state.StatusAgent, Note: "started"}); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(append([]string{"-chdir", dir}, args...), strings.NewReader(""), &out, &errb, os.Environ())
		return out.String(), errb.String(), code
	}
	out, stderr, code := run("state", "list")
	if code != 0 || !strings.Contains(out, "baseline/agent/hello#1") || !strings.Contains(out, "agent") {
		t.Errorf("state list while the writer holds the store: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	out, stderr, code = run("state", "show", "baseline/agent/hello#1")
	if code != 0 || !strings.Contains(out, "status") || !strings.Contains(out, "started") {
		t.Errorf("state show while the writer holds the store: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	// The writer keeps writing, and the readers see it.
	if err := w.Finish(a.ID, state.StatusErrored, &state.Outcome{Error: "sandbox could not start\ndetails"}); err != nil {
		t.Fatal(err)
	}
	out, _, _ = run("state", "list")
	if !strings.Contains(out, "errored") || !strings.Contains(out, "infra_error") {
		t.Errorf("state list after the writer finished the attempt: %q", out)
	}
	out, _, _ = run("state", "show", a.ID)
	if !strings.Contains(out, "sandbox could not start ...") || !strings.Contains(out, "Attempt baseline/agent/hello#1") {
		t.Errorf("state show by attempt id: %q", out)
	}
}

// TestStateCheckReportsInconsistency checks that `hemra state check` fails
// when a record names a blob that is gone.
func TestStateCheckReportsInconsistency(t *testing.T) {
	dir := t.TempDir()
	storeDir := filepath.Join(dir, ".hemra")
	w, err := state.Open(storeDir, state.Options{Writer: true})
	if err != nil {
		t.Fatal(err)
	}
	sha, err := w.PutBlob([]byte("echo 1 > reward.txt\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := statetest.Attempt("baseline/agent/hello#1", "fp")
	a.Manifest.Inputs = append(a.Manifest.Inputs, state.Input{Stage: "verify", Path: "task.tests/test.sh", Value: "sha256:" + sha, Blob: sha})
	if err := w.AddAttempt(a); err != nil {
		t.Fatal(err)
	}
	w.Close()

	var out, errb bytes.Buffer
	if code := Main([]string{"-chdir", dir, "state", "check"}, nil, &out, &errb, nil); code != 0 {
		t.Fatalf("state check of a sound store: exit %d: %s%s", code, out.String(), errb.String())
	}
	if err := os.Remove(w.BlobPath(sha)); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	code := Main([]string{"-chdir", dir, "state", "check"}, nil, &out, &errb, nil)
	if code != 1 || !strings.Contains(out.String(), "task.tests/test.sh names blob "+sha+", which is missing") {
		t.Errorf("state check with a missing blob: exit %d, %q", code, out.String())
	}
}
