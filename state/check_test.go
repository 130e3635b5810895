package state

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// checkedStore is a store of n planned attempts whose inputs name blobs
// that are stored, closed, and opened again as a reader.
func checkedStore(t *testing.T, n int) (*Store, []*Attempt) {
	t.Helper()
	dir := t.TempDir()
	w, err := Open(dir, Options{Writer: true})
	if err != nil {
		t.Fatal(err)
	}
	var as []*Attempt
	for i := range n {
		a := planned("h", fmt.Sprintf("t%04d", i), 1)
		a.RunID = ""
		for j, in := range a.Manifest.Inputs {
			if in.Blob == "" {
				continue
			}
			sha, err := w.PutBlob([]byte(in.Path + " of " + a.Manifest.Task))
			if err != nil {
				t.Fatal(err)
			}
			a.Manifest.Inputs[j].Blob, a.Manifest.Inputs[j].Value = sha, "sha256:"+sha
		}
		as = append(as, a)
	}
	if err := w.AddAttempts(as); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r, as
}

func mustCheck(t *testing.T, s *Store) *CheckReport {
	t.Helper()
	rep, err := s.Check()
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestCheckFindsDamagedBlobs: a blob whose content no longer hashes to its
// name, and one made writable, are each reported.
func TestCheckFindsDamagedBlobs(t *testing.T) {
	s, as := checkedStore(t, 3)
	if rep := mustCheck(t, s); len(rep.Problems) != 0 || rep.Blobs != 9 {
		t.Fatalf("Check of a sound store = %+v, want 9 blobs and no problem", rep)
	}
	corrupt := s.BlobPath(as[0].Manifest.Inputs[6].Blob)
	writable := s.BlobPath(as[1].Manifest.Inputs[9].Blob)
	if err := os.Chmod(corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(corrupt, []byte("changed"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(corrupt, 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(writable, 0o644); err != nil {
		t.Fatal(err)
	}
	rep := mustCheck(t, s)
	rel := func(p string) string { r, _ := filepath.Rel(s.Dir(), p); return r }
	changed := sha256.Sum256([]byte("changed"))
	want := []string{
		rel(corrupt) + ": content hashes to " + hex.EncodeToString(changed[:]) + ": the blob is corrupt",
		rel(writable) + ": writable (-rw-r--r--); blobs are read-only",
	}
	slices.Sort(want)
	if !reflect.DeepEqual(rep.Problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(rep.Problems, "\n"), strings.Join(want, "\n"))
	}
}

// TestCheckFindsMissingGroup: a group records name that is gone is
// reported once, by the first attempt naming it; a blob only a group
// names, once gone, by the attempt and input that name it.
func TestCheckFindsMissingGroup(t *testing.T) {
	s, as := checkedStore(t, 3)
	_, _, ok := scanRecord(mustRecord(t, s, as[0].ID), false)
	if !ok {
		t.Fatal("scanRecord declined a record the store wrote")
	}
	_, sm, err := decodeStored(as[0].ID, mustRecord(t, s, as[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	// The harness's inputs, shared by every attempt (the first group).
	shared := sm.InputGroups[0]
	db, err := bolt.Open(filepath.Join(s.Dir(), dbFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketGroups).Delete([]byte(shared)) })
	db.Close()
	tests := as[2].Manifest.Inputs[9]
	if err := os.Remove(s.BlobPath(tests.Blob)); err != nil {
		t.Fatal(err)
	}
	first := as[0].ID
	for _, a := range as {
		first = min(first, a.ID)
	}
	got := mustCheck(t, s).Problems
	want := []string{
		"attempt " + as[2].ID + " input task.tests/test.sh names blob " + tests.Blob + ", which is missing",
		"attempts/" + first + ": group " + shared + " is missing",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func mustRecord(t *testing.T, s *Store, id string) []byte {
	t.Helper()
	var val []byte
	if err := s.View(func(v *View) error {
		val = append([]byte(nil), v.get(bucketAttempts, id)...)
		return nil
	}); err != nil || val == nil {
		t.Fatalf("record %s: %v", id, err)
	}
	val, err := unpackValue(val) // its JSON, as state check reads it
	if err != nil {
		t.Fatalf("record %s: %v", id, err)
	}
	return val
}

// TestCheckDroppingPages: bbolt's consistency check, its pages dropped as
// it goes (a state.db larger than verifyResident), finds what it finds
// keeping them.
func TestCheckDroppingPages(t *testing.T) {
	s, as := checkedStore(t, 50)
	if err := os.Remove(s.BlobPath(as[7].Manifest.Inputs[6].Blob)); err != nil {
		t.Fatal(err)
	}
	kept := mustCheck(t, s)
	oldSize, oldEvery := verifyResident, verifyDropEvery
	verifyResident, verifyDropEvery = 0, 50*time.Microsecond
	defer func() { verifyResident, verifyDropEvery = oldSize, oldEvery }()
	dropped := mustCheck(t, s)
	if !reflect.DeepEqual(kept, dropped) || len(kept.Problems) != 1 {
		t.Errorf("Check dropping pages = %+v, keeping them %+v", dropped, kept)
	}
}
