package state

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestBatchWaitSharesCommits: writes that come one after another (as
// apply's attempts end at -parallelism 1) share one commit under a batch
// wait; lifting the wait commits a waiting batch at once.
func TestBatchWaitSharesCommits(t *testing.T) {
	st, err := Open(t.TempDir(), Options{Writer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.SetBatchWait(time.Hour)
	before := st.DBOpens()
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		a := &Attempt{Address: fmt.Sprintf("e/h/t%d#1", i), Transitions: []Transition{{Status: StatusAgent}}}
		go func() { errs <- st.AddAttempt(a) }()
		time.Sleep(2 * time.Millisecond) // one at a time, as attempts end
	}
	select {
	case err := <-errs:
		t.Fatalf("a write returned (%v) while its batch waits for more", err)
	case <-time.After(50 * time.Millisecond):
	}
	st.SetBatchWait(0)
	for range n {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("lifting the wait did not commit the waiting batch")
		}
	}
	if got := st.DBOpens() - before; got != 1 {
		t.Errorf("%d writes made %d commits, want 1", n, got)
	}
	var count int
	if err := st.View(func(v *View) error {
		return v.ForEachCurrent(func(string, Current) error { count++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if count != n {
		t.Errorf("%d attempts recorded, want %d", count, n)
	}
	// WriteNow does not wait out the batch wait, and takes along what
	// waits with it.
	st.SetBatchWait(time.Hour)
	waiting := make(chan error, 1)
	go func() { waiting <- st.AddAttempt(&Attempt{Address: "e/h/waits#1"}) }()
	time.Sleep(10 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- st.WriteNow(AddAttempts(&Attempt{Address: "e/h/now#1"})) }()
	for _, ch := range []chan error{done, waiting} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("WriteNow waited for the batch wait")
		}
	}
	st.SetBatchWait(0)
	// Without a wait a lone write commits at once.
	start := time.Now()
	if err := st.AddAttempt(&Attempt{Address: "e/h/alone#1"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a write without a batch wait took %s", d)
	}
}

// TestBackupOfABigState: a big state (here: backupAlways lowered) that
// changed since its backup is copied again only once the backup is old
// enough for its size, when a writer closes or opens it; a missing backup
// is always written.
func TestBackupOfABigState(t *testing.T) {
	oldAlways, oldRate := backupAlways, backupRate
	backupAlways, backupRate = 0, 1 // one second of age per byte: never due
	defer func() { backupAlways, backupRate = oldAlways, oldRate }()
	dir := t.TempDir()
	session := func() {
		t.Helper()
		st, err := Open(dir, Options{Writer: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.AddAttempt(&Attempt{Address: "e/h/" + NewID() + "#1"}); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	backupSerial := func() uint64 {
		t.Helper()
		m, _, err := readBackupMeta(dir)
		if err != nil {
			t.Fatal(err)
		}
		return m.Serial
	}
	session()
	first := backupSerial() // no backup yet: written
	session()
	session()
	if got := backupSerial(); got != first {
		t.Errorf("backup refreshed to serial %d before it was due (still %d wanted)", got, first)
	}
	old := time.Now().Add(-1000 * time.Hour)
	if err := os.Chtimes(filepath.Join(dir, backupFile), old, old); err != nil {
		t.Fatal(err)
	}
	backupRate = 1 << 20
	session()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Meta()
	if err != nil {
		t.Fatal(err)
	}
	if got := backupSerial(); got != m.Serial {
		t.Errorf("an old backup was not refreshed: serial %d, the state's %d", got, m.Serial)
	}
}

// TestUnsyncedBlobsRecovered: blobs are synced once per commit, not each
// as it is stored; a writer that finds the marker of one that stopped
// before its sync removes the blobs stored since whose content is not
// their name, and keeps the others.
func TestUnsyncedBlobsRecovered(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{Writer: true})
	if err != nil {
		t.Fatal(err)
	}
	good, err := st.PutBlob([]byte("kept\n"))
	if err != nil {
		t.Fatal(err)
	}
	torn, err := st.PutBlob([]byte("its content never reached the disk\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, blobsUnsynced)); err != nil {
		t.Fatalf("no marker while blobs are unsynced: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, blobsUnsynced)); err == nil {
		t.Fatal("the marker outlived a clean close")
	}
	// A writer killed before its sync: the marker left, a blob emptied.
	if err := ensureFile(filepath.Join(dir, blobsUnsynced)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, blobsDir, "sha256", torn[:2], torn)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	st, err = Open(dir, Options{Writer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.HasBlob(torn) {
		t.Error("a blob whose content is not its name was kept")
	}
	if b, err := st.Blob(good); err != nil || string(b) != "kept\n" {
		t.Errorf("a whole blob: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, blobsUnsynced)); err == nil {
		t.Error("the marker outlived the recovery")
	}
	// Storing the content again writes it whole.
	if _, err := st.PutBlob([]byte("its content never reached the disk\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := st.Blob(torn); err != nil || string(b) != "its content never reached the disk\n" {
		t.Errorf("stored again: %q, %v", b, err)
	}
}

// TestAttemptOutcomeReadsTheRecordsOutcome: the outcome read alone is the
// outcome of the whole record.
func TestAttemptOutcomeReadsTheRecordsOutcome(t *testing.T) {
	st, err := Open(t.TempDir(), Options{Writer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := planned("h", "t", 1)
	a.Outcome = nil
	a.Transitions = []Transition{{Status: StatusAgent}}
	if err := st.AddAttempt(a); err != nil {
		t.Fatal(err)
	}
	if err := st.Finish(a.ID, StatusFinished, &Outcome{Class: ClassPassed, Snapshot: "local:empty", Steps: []StepOutcome{{Name: "s", Snapshot: "/x/snapshot"}}}); err != nil {
		t.Fatal(err)
	}
	err = st.View(func(v *View) error {
		whole, err := v.Attempt(a.ID)
		if err != nil {
			return err
		}
		o, err := v.AttemptOutcome(a.ID)
		if err != nil {
			return err
		}
		if o == nil || o.Snapshot != whole.Outcome.Snapshot || len(o.Steps) != 1 || o.Steps[0].Snapshot != "/x/snapshot" || o.Class != whole.Outcome.Class {
			t.Errorf("AttemptOutcome = %+v, want the record's %+v", o, whole.Outcome)
		}
		if _, err := v.AttemptOutcome("nope"); err == nil {
			t.Error("AttemptOutcome of an unknown id succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
