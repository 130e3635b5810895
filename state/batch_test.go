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
	// Without a wait a lone write commits at once.
	start := time.Now()
	if err := st.AddAttempt(&Attempt{Address: "e/h/alone#1"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a write without a batch wait took %s", d)
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
