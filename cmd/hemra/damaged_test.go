package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHemraChild is hemra itself, for tests that must run it in a process
// of its own (a crash there must not take the test binary down).
func TestHemraChild(t *testing.T) {
	args := os.Getenv("HEMRA_CHILD_ARGS")
	if args == "" {
		t.Skip("runs only as a child of another test")
	}
	os.Exit(Main(strings.Split(args, "\x1f"), os.Stdin, os.Stdout, os.Stderr, os.Environ()))
}

// runChild runs hemra ARGS in its own process in dir, returning its exit
// status and everything it printed.
func runChild(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHemraChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), "HEMRA_CHILD_ARGS="+strings.Join(append([]string{"-chdir", dir, "-no-color"}, args...), "\x1f"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// appliedQuickstart copies examples/quickstart into a temporary folder and
// applies it; the store holds eight finished attempts.
func appliedQuickstart(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../examples/quickstart")); err != nil {
		t.Fatal(err)
	}
	if code, out := runChild(t, dir, "apply", "-auto-approve"); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	return dir
}

// crashed reports whether hemra died of a Go panic or a fatal fault rather
// than saying what is wrong.
func crashed(code int, out string) bool {
	return code == 2 || strings.Contains(out, "\npanic: ") || strings.HasPrefix(out, "panic: ") ||
		strings.Contains(out, "fatal error:") || strings.Contains(out, "\ngoroutine ")
}

// TestDamagedStateNoCommandCrashes damages a real state.db 48 ways
// (truncated at page boundaries and inside pages, emptied, single bytes
// flipped at seeded random offsets and in the meta, freelist and root
// pages) and runs every command that reads the state on each copy. None
// may crash; each either works or says the state file is damaged; a
// truncated or emptied file is always reported as damaged; and no apply
// runs anything on a damaged file.
func TestDamagedStateNoCommandCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about 350 hemra processes")
	}
	dir := appliedQuickstart(t)
	good, err := os.ReadFile(filepath.Join(dir, ".hemra", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	type variant struct {
		name string
		data []byte
		// mustRefuse: every command must say the file is damaged.
		mustRefuse bool
	}
	var variants []variant
	for _, n := range []int{0, 100, 4096, 5000, 8192, 12000, 16384, 20480, 32768, 40000} {
		variants = append(variants, variant{fmt.Sprintf("truncated to %d", n), bytes.Clone(good[:n]), true})
	}
	// bbolt grows its file ahead of the pages in use: cutting only that
	// tail loses nothing.
	for _, n := range []int{len(good) - 4096, len(good) - 1} {
		variants = append(variants, variant{fmt.Sprintf("truncated to %d", n), bytes.Clone(good[:n]), false})
	}
	flip := func(off int) []byte {
		d := bytes.Clone(good)
		d[off] ^= 0xff
		return d
	}
	// Meta pages (0, 1), the freelist and the first bucket pages.
	for _, off := range []int{0, 16, 20, 32, 40, 56, 4096 + 16, 4096 + 40, 8192, 8200, 8208, 12288, 12300, 16384, 16400, 20480} {
		variants = append(variants, variant{fmt.Sprintf("byte %d flipped", off), flip(off), false})
	}
	rng := rand.New(rand.NewPCG(13, 2))
	for len(variants) < 48 {
		off := rng.IntN(len(good))
		variants = append(variants, variant{fmt.Sprintf("byte %d flipped", off), flip(off), false})
	}

	// state check first: a byte flipped inside a record's JSON is not
	// something bbolt can see, so apply may act on what it then reads.
	commands := [][]string{{"state", "check"}, {"show"}, {"plan"}, {"state", "list"}, {"runs"}, {"apply", "-auto-approve"}, {"state", "compact"}}
	store := filepath.Join(dir, ".hemra")
	pristine := filepath.Join(t.TempDir(), "store")
	copyTree(t, store, pristine)
	db := filepath.Join(store, "state.db")
	for _, v := range variants {
		checkFound := false
		for _, args := range commands {
			if err := os.RemoveAll(store); err != nil {
				t.Fatal(err)
			}
			copyTree(t, pristine, store)
			if err := os.WriteFile(db, v.data, 0o600); err != nil {
				t.Fatal(err)
			}
			code, out := runChild(t, dir, args...)
			if args[0] == "state" && args[1] == "check" {
				checkFound = code != 0
			}
			what := fmt.Sprintf("%s, hemra %s", v.name, strings.Join(args, " "))
			if crashed(code, out) {
				t.Errorf("%s crashed (exit %d):\n%s", what, code, firstLines(out, 12))
				continue
			}
			saysDamaged := strings.Contains(out, "is damaged")
			if v.mustRefuse && (!saysDamaged || code != 1) {
				t.Errorf("%s: exit %d without saying the state file is damaged:\n%s", what, code, firstLines(out, 6))
			}
			if saysDamaged && !strings.Contains(out, "docs/state.md") {
				t.Errorf("%s: says damaged but not what to do:\n%s", what, firstLines(out, 6))
			}
			if args[0] == "apply" && code == 0 && !strings.Contains(out, "No changes") && checkFound {
				t.Errorf("%s ran attempts again on a damaged state:\n%s", what, firstLines(out, 6))
			}
		}
	}
}

// TestEmptyStateBesideBlobsRefused: a 0-byte or missing state.db in a store
// that holds blobs and event logs is a lost state, not an empty one: apply
// must not run every attempt again.
func TestEmptyStateBesideBlobsRefused(t *testing.T) {
	dir := appliedQuickstart(t)
	db := filepath.Join(dir, ".hemra", "state.db")
	for _, how := range []string{"emptied", "removed"} {
		if how == "emptied" {
			if err := os.Truncate(db, 0); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Remove(db); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"apply", "-auto-approve"}, {"plan"}, {"state", "check"}} {
			code, out := runChild(t, dir, args...)
			if code != 1 || !strings.Contains(out, "is damaged") || !strings.Contains(out, "event logs, blobs") {
				t.Errorf("state.db %s, hemra %s: exit %d, want a refusal naming what the store holds:\n%s", how, strings.Join(args, " "), code, firstLines(out, 6))
			}
		}
		if _, err := os.Stat(db); how == "removed" && err == nil {
			t.Errorf("apply created a new state.db beside the old store's files")
		}
	}
}

// TestRestoreFromBackup follows docs/state.md's restore procedure: after an
// apply, state.db.backup holds the state it left; a damaged state.db is
// moved aside, the backup copied in, and the store reads as before.
func TestRestoreFromBackup(t *testing.T) {
	dir := appliedQuickstart(t)
	store := filepath.Join(dir, ".hemra")
	if _, err := os.Stat(filepath.Join(store, "state.db.backup")); err != nil {
		t.Fatalf("no backup after an apply: %v", err)
	}
	_, before := runChild(t, dir, "state", "list")
	if err := os.Truncate(filepath.Join(store, "state.db"), 8192); err != nil {
		t.Fatal(err)
	}
	code, out := runChild(t, dir, "plan")
	if code != 1 || !strings.Contains(out, "state.db.backup") {
		t.Fatalf("plan on a truncated state: exit %d, want the backup named:\n%s", code, out)
	}
	// The procedure, as docs/state.md gives it.
	if err := os.Rename(filepath.Join(store, "state.db"), filepath.Join(store, "state.db.damaged")); err != nil {
		t.Fatal(err)
	}
	backup, err := os.ReadFile(filepath.Join(store, "state.db.backup"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "state.db"), backup, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := runChild(t, dir, "state", "check"); code != 0 || !strings.Contains(out, "No inconsistencies") {
		t.Fatalf("state check after the restore: exit %d\n%s", code, out)
	}
	if _, after := runChild(t, dir, "state", "list"); after != before {
		t.Errorf("state list after the restore:\n%s\nwant, as before the damage:\n%s", after, before)
	}
	if code, out := runChild(t, dir, "apply", "-auto-approve"); code != 0 || !strings.Contains(out, "No changes") {
		t.Errorf("apply after the restore: exit %d, want No changes:\n%s", code, out)
	}
}

// copyTree copies a folder, keeping each file's mode.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(dst, info.Mode().Perm()|0o700)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			return err
		}
		return os.Chmod(dst, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
