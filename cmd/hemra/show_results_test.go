package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hemra-dev/hemra/state"
	"github.com/hemra-dev/hemra/state/statetest"
)

// TestShowReadsTheStoreOnce checks that the listings read the whole state
// in one read transaction (one open of state.db), not one per address or
// attempt: at 100k attempts that is the difference between a blink and
// minutes.
func TestShowReadsTheStoreOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".hemra")
	w, err := state.Open(dir, state.Options{Writer: true, Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	run := &state.Run{ID: "run-1", Planned: 5}
	if err := w.BeginRun(run); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, addr := range []string{"e/h/a#1", "e/h/b#1", "e/h/c#1", "e/h/HumanEval/0#1", "e/g/a#1"} {
		a := statetest.Attempt(addr, "fp")
		a.RunID = run.ID
		if err := w.AddAttempt(a); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{"", run.ID} {
		st, err := state.Open(dir, state.Options{})
		if err != nil {
			t.Fatal(err)
		}
		before := st.DBOpens() // Open checks the format
		var out bytes.Buffer
		c := &ShowCmd{Path: path}
		g := &Globals{Stdout: &out, Stderr: &out}
		if path == "" {
			err = c.showLatest(g, st)
		} else {
			_, err = c.showRun(g, st, path)
		}
		if err != nil {
			t.Fatalf("show %q: %v", path, err)
		}
		if !strings.Contains(out.String(), "e/h/HumanEval/0#1") && path != "" {
			t.Errorf("show %s lists no e/h/HumanEval/0#1:\n%s", path, out.String())
		}
		opens := st.DBOpens() - before
		if opens != 1 {
			t.Errorf("show %q opened state.db %d times for %d attempts; want once", path, opens, len(ids))
		}
		st.Close()
	}
}
