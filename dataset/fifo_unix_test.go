//go:build unix

package dataset

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestSpecialFilesRefusedWithoutBlocking(t *testing.T) {
	root := t.TempDir()
	writeTask(t, root, "fifo")
	// Opening a FIFO for reading would block forever: it must be refused
	// from its directory entry.
	if err := syscall.Mkfifo(filepath.Join(root, "fifo", "tests", "pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	_, diags := LoadDir(root, LoadOptions{})
	if got := diagLines(diags); len(got) != 1 || !strings.HasSuffix(got[0], "pipe: Unsupported file in task") {
		t.Errorf("diagnostics = %v", got)
	}
}
