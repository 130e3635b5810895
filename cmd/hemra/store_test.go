package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenStoreWarned: apply and doctor warn about a store, or a state
// file, that other users can read, and say how to close it; a private
// store gets no warning.
func TestOpenStoreWarned(t *testing.T) {
	dir := appliedQuickstart(t)
	store := filepath.Join(dir, ".hemra")
	for _, tc := range []struct {
		path string
		mode os.FileMode
		fix  string
	}{
		{store, 0o755, "chmod 700"},
		{filepath.Join(store, "state.db"), 0o644, "chmod 600"},
	} {
		if err := os.Chmod(tc.path, tc.mode); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"apply", "-auto-approve"}, {"doctor"}} {
			_, out := runChild(t, dir, args...)
			if !strings.Contains(out, "Warning: "+tc.path+" is open to other users") || !strings.Contains(out, tc.fix) {
				t.Errorf("%s %o: hemra %s says\n%s\nwant a warning naming it and %q", tc.path, tc.mode, args[0], firstLines(out, 4), tc.fix)
			}
		}
		if err := os.Chmod(tc.path, tc.mode&0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"apply", "-auto-approve"}, {"doctor"}} {
		if _, out := runChild(t, dir, args...); strings.Contains(out, "Warning:") {
			t.Errorf("private store: hemra %s warns:\n%s", args[0], firstLines(out, 4))
		}
	}
}

// TestDoctorReportsStoreSize: doctor says how much the store takes on disk,
// part by part.
func TestDoctorReportsStoreSize(t *testing.T) {
	dir := appliedQuickstart(t)
	code, out := runChild(t, dir, "doctor")
	if code != 0 {
		t.Fatalf("doctor: exit %d\n%s", code, out)
	}
	first := firstLines(out, 1)
	for _, want := range []string{"on disk", "state.db", "backup", "18 blobs", "8 event logs", "work folders"} {
		if !strings.Contains(first, want) {
			t.Errorf("doctor's store line %q lacks %q", first, want)
		}
	}
}
