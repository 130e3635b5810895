package local

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// emptyDir takes only a real, empty folder for an empty one: a link to an
// empty folder (inside the workspace or out of it), a file or a FIFO is
// not one, and a missing name is an error that says so.
func TestEmptyDir(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	ws := filepath.Join(dir, "ws")
	for _, d := range []string{"empty", "full"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "full", "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("empty", filepath.Join(ws, "link-in")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for name, want := range map[string]bool{"empty": true, "full": false, "file": false, "link-in": false, "link-out": false, "fifo": false} {
		got, err := emptyDir(root, name)
		if err != nil || got != want {
			t.Errorf("emptyDir(%s) = %v, %v; want %v, nil", name, got, err, want)
		}
	}
	if _, err := emptyDir(root, "missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("emptyDir(missing): %v, want not exist", err)
	}
}
