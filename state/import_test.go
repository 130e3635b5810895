package state

import (
	"strings"
	"testing"
	"time"
)

// TestImportKeepsImportedAttemptsOutOfPlan checks that imported attempts
// live in their own index (plan's ForEachCurrent never sees them), are
// found by address, and that importing the same records twice adds nothing.
func TestImportKeepsImportedAttemptsOutOfPlan(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Options{Writer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	at := time.Date(2026, 2, 1, 18, 3, 4, 0, time.UTC)
	reward := 1.0
	run := &Run{ID: NewID(), StartedAt: at, FinishedAt: at, Status: "imported", Kind: "import", Source: "jobs/j"}
	imp := &Attempt{ID: NewID(), Address: "import/j/oracle/hello#1", RunID: run.ID,
		Manifest:    Manifest{Eval: "import/j", Harness: "oracle", Task: "hello", Repetition: 1},
		Transitions: []Transition{{Status: StatusPending, At: at}, {Status: StatusFinished, At: at}},
		Outcome:     &Outcome{Class: ClassPassed, Reward: &reward, StartedAt: at, FinishedAt: at},
		Origin:      &Origin{Format: "harbor", Job: "j", Trial: "hello__abc", ImportedAt: at}}
	if n, err := w.Import([]*Run{run}, []*Attempt{imp}); n != 1 || err != nil {
		t.Fatalf("Import = %d, %v", n, err)
	}
	if n, err := w.Import([]*Run{run}, []*Attempt{imp}); n != 0 || err != nil {
		t.Fatalf("Import again = %d, %v; want nothing added", n, err)
	}
	changed := *imp
	changed.Outcome = &Outcome{Class: ClassTaskFailure}
	if _, err := w.Import(nil, []*Attempt{&changed}); err == nil || !strings.Contains(err.Error(), "other content") {
		t.Errorf("Import of a changed record: %v, want it refused", err)
	}
	seen := 0
	if err := w.ForEachCurrent(func(string, Current) error { seen++; return nil }); err != nil || seen != 0 {
		t.Errorf("ForEachCurrent saw %d addresses (%v); imported attempts are never planned", seen, err)
	}
	got, err := w.CurrentAttempt(imp.Address)
	if err != nil || got.ID != imp.ID || got.Origin == nil {
		t.Errorf("CurrentAttempt(%s) = %+v, %v", imp.Address, got, err)
	}
	var sums []Summary
	err = w.View(func(v *View) error {
		return v.ForEachSummary(IndexImported, "import/j/", func(s Summary) error { sums = append(sums, s); return nil })
	})
	if err != nil || len(sums) != 1 || !sums[0].Imported || sums[0].Task != "hello" {
		t.Errorf("imported summaries = %+v, %v", sums, err)
	}
	if rep, err := w.Check(); err != nil || len(rep.Problems) != 0 {
		t.Errorf("Check: %+v, %v", rep, err)
	}
}
