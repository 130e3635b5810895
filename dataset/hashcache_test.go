package dataset

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// cacheFixture writes three tasks and returns the dataset folder and a
// cache path. Files written by a test are seconds old at most: the racy
// window (files that young are never recorded) is turned off for it.
func cacheFixture(t *testing.T) (dir, cachePath string) {
	t.Helper()
	if !cacheSupported {
		t.Skip("the file hash cache is used on Linux only")
	}
	old := racyWindow
	racyWindow = 0
	t.Cleanup(func() { racyWindow = old })
	dir = t.TempDir()
	for _, name := range []string{"alpha", "beta", "gamma"} {
		writeTask(t, dir, name)
	}
	must(t, os.WriteFile(filepath.Join(dir, "beta", "environment", "Dockerfile"), []byte("FROM python:3.12-slim\n"), 0o644))
	must(t, os.Symlink("test.sh", filepath.Join(dir, "gamma", "tests", "link.sh")))
	return dir, filepath.Join(t.TempDir(), "cache", "filehash.v1")
}

// waitTick waits until the filesystem's clock has moved past every file
// under dir (timestamps are coarse: a change in the same tick as a
// recorded stat is invisible, which the racy guard handles; tests that
// need a visible change wait it out). Bounded to 3 s.
func waitTick(t *testing.T, dir string) {
	t.Helper()
	var newest time.Time
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.ModTime().After(newest) {
			newest = fi.ModTime()
		}
		return nil
	})
	probe := filepath.Join(t.TempDir(), "probe")
	for range 300 {
		must(t, os.WriteFile(probe, nil, 0o644))
		fi, err := os.Stat(probe)
		must(t, err)
		if fi.ModTime().After(newest) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the filesystem clock did not move in 3 s")
}

// loadWith loads dir through a cache at path (saved afterwards) and
// reports whether the cache had to change.
func loadWith(t *testing.T, dir, path string) ([]*Task, bool) {
	t.Helper()
	hc := OpenHashCache(path)
	tasks, diags := LoadDir(dir, LoadOptions{HashCache: hc, Workers: 2})
	if diags.HasErrors() {
		t.Fatalf("load: %s", strings.Join(diagLines(diags), "\n"))
	}
	changed := hc.Changed()
	must(t, hc.Save())
	return tasks, changed
}

func loadPlain(t *testing.T, dir string) []*Task {
	t.Helper()
	tasks, diags := LoadDir(dir, LoadOptions{})
	if diags.HasErrors() {
		t.Fatalf("load: %s", strings.Join(diagLines(diags), "\n"))
	}
	return tasks
}

func sameTasks(t *testing.T, got, want []*Task) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		for i := range min(len(got), len(want)) {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("task %s differs with the cache:\n got %+v\nwant %+v", want[i].Name, got[i], want[i])
			}
		}
		t.Fatalf("got %d tasks with the cache, want %d", len(got), len(want))
	}
}

// settle records every file in a cache written after the clock moved
// past them, so every entry is valid.
func settle(t *testing.T, dir, path string) {
	t.Helper()
	waitTick(t, dir)
	loadWith(t, dir, path)
	if hc := OpenHashCache(path); hc.Len() == 0 {
		t.Fatal("no cache file was written")
	}
}

func TestHashCacheSameTasksAndNothingReadTwice(t *testing.T) {
	dir, path := cacheFixture(t)
	want := loadPlain(t, dir)
	waitTick(t, dir)
	first, changed := loadWith(t, dir, path)
	if !changed {
		t.Fatal("the first load with an empty cache did not record anything")
	}
	sameTasks(t, first, want)
	waitTick(t, filepath.Dir(path))

	second, changed := loadWith(t, dir, path)
	sameTasks(t, second, want)
	if changed {
		t.Fatal("a second load of unchanged files did not find them all in the cache")
	}
	if want[1].Dockerfile == nil || string(second[1].Dockerfile) != "FROM python:3.12-slim\n" {
		t.Fatalf("Dockerfile bytes: got %q", second[1].Dockerfile)
	}
}

func TestHashCacheSeesAnEditThatKeepsSizeAndMtime(t *testing.T) {
	dir, path := cacheFixture(t)
	settle(t, dir, path)
	test := filepath.Join(dir, "alpha", "tests", "test.sh")
	instr := filepath.Join(dir, "beta", "instruction.md")
	fi, err := os.Stat(test)
	must(t, err)
	fi2, err := os.Stat(instr)
	must(t, err)
	waitTick(t, dir)
	// Same size, same mtime restored: only ctime tells.
	must(t, os.WriteFile(test, []byte("#!/bin/ba\n"), 0o755))
	must(t, os.Chtimes(test, fi.ModTime(), fi.ModTime()))
	must(t, os.WriteFile(instr, []byte("Do that\n"[:len("Do it.\n")]), 0o644))
	must(t, os.Chtimes(instr, fi2.ModTime(), fi2.ModTime()))

	got, changed := loadWith(t, dir, path)
	if !changed {
		t.Fatal("the edited files were taken from the cache")
	}
	sameTasks(t, got, loadPlain(t, dir))
	if got[0].Tests[0].SHA256 != sha([]byte("#!/bin/ba\n")) {
		t.Fatalf("test.sh hash is the old one")
	}
	if string(got[1].Instruction) != "Do that" {
		t.Fatalf("instruction: got %q", got[1].Instruction)
	}
}

func TestHashCacheSeesFilesAddedAndRemoved(t *testing.T) {
	dir, path := cacheFixture(t)
	settle(t, dir, path)
	tests := filepath.Join(dir, "gamma", "tests")
	fi, err := os.Stat(tests)
	must(t, err)
	waitTick(t, dir)
	must(t, os.WriteFile(filepath.Join(tests, "extra.py"), []byte("x = 1\n"), 0o644))
	must(t, os.Remove(filepath.Join(dir, "alpha", "environment")))
	// The folder's mtime put back: its ctime still moved.
	must(t, os.Chtimes(tests, fi.ModTime(), fi.ModTime()))

	got, _ := loadWith(t, dir, path)
	sameTasks(t, got, loadPlain(t, dir))
	if !strings.Contains(strings.Join(paths(got[2].Tests), " "), "tests/extra.py") {
		t.Fatalf("the added file is missing: %v", paths(got[2].Tests))
	}
}

func TestHashCacheNeverTrustsRacilyCleanEntries(t *testing.T) {
	dir, path := cacheFixture(t)
	settle(t, dir, path)
	// A cache file older than the files it records (as when a file is
	// modified in the instant the cache is written): nothing is reused.
	past := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(path, past, past))
	_, changed := loadWith(t, dir, path)
	if !changed {
		t.Fatal("entries not older than the cache file were reused")
	}

	// Files modified within the racy window are not even recorded.
	racyWindow = time.Hour
	os.Remove(path)
	loadWith(t, dir, path)
	if hc := OpenHashCache(path); hc.Len() != 0 {
		t.Fatalf("recorded %d folders whose files were just modified", hc.Len())
	}
}

func TestHashCacheIgnoresCorruptAndForeignFiles(t *testing.T) {
	dir, path := cacheFixture(t)
	settle(t, dir, path)
	data, err := os.ReadFile(path)
	must(t, err)
	want := loadPlain(t, dir)
	for name, bad := range map[string][]byte{
		"flipped byte": func() []byte { b := append([]byte(nil), data...); b[len(b)/2] ^= 0x40; return b }(),
		"truncated":    data[:len(data)-7],
		"foreign":      []byte("hello, this is not a cache\n"),
		"empty":        nil,
		"magic only":   []byte(cacheMagic),
	} {
		must(t, os.WriteFile(path, bad, 0o600))
		if hc := OpenHashCache(path); hc.Len() != 0 {
			t.Errorf("%s: the cache was used", name)
		}
		got, _ := loadWith(t, dir, path)
		sameTasks(t, got, want)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("a bad cache file is not replaced by a good one: %v", err)
	}
	if hc := OpenHashCache(path); hc.Len() != 3 {
		t.Fatalf("rewritten cache holds %d folders, want 3", hc.Len())
	}
}

func TestHashCacheDropsFoldersNoLongerLoaded(t *testing.T) {
	dir, path := cacheFixture(t)
	settle(t, dir, path)
	must(t, os.RemoveAll(filepath.Join(dir, "beta")))
	waitTick(t, dir)
	got, changed := loadWith(t, dir, path)
	if !changed || len(got) != 2 {
		t.Fatalf("changed %v, %d tasks", changed, len(got))
	}
	if hc := OpenHashCache(path); hc.Len() != 2 {
		t.Fatalf("cache holds %d folders, want 2 (beta dropped)", hc.Len())
	}
	must(t, DropHashCache(path))
	must(t, DropHashCache(path)) // a missing one is fine
}

func TestHashCacheBigKeptFileReadEveryTimeWithoutRewrites(t *testing.T) {
	dir, path := cacheFixture(t)
	big := strings.Repeat("Explain every step.\n", maxCachedContent/10)
	must(t, os.WriteFile(filepath.Join(dir, "alpha", "instruction.md"), []byte(big), 0o644))
	settle(t, dir, path)
	got, changed := loadWith(t, dir, path)
	if changed {
		t.Fatal("an unchanged big instruction rewrites the cache on every load")
	}
	if string(got[0].Instruction) != big {
		t.Fatalf("big instruction: got %d bytes, want %d", len(got[0].Instruction), len(big))
	}
}

func TestHashCacheTwoDatasetsOverOneFolder(t *testing.T) {
	dir, path := cacheFixture(t)
	waitTick(t, dir)
	for range 2 {
		hc := OpenHashCache(path)
		for range 2 { // two dataset blocks with the same source
			if _, diags := LoadDir(dir, LoadOptions{HashCache: hc}); diags.HasErrors() {
				t.Fatal(diags)
			}
		}
		must(t, hc.Save())
		if hc := OpenHashCache(path); hc.Len() != 3 {
			t.Fatalf("cache holds %d folders, want 3", hc.Len())
		}
	}
}

// A task folder whose listing the cache holds is not opened: a folder
// swapped for another (same name, another inode) or for a link must
// still be read afresh.
func TestHashCacheSeesATaskFolderSwapped(t *testing.T) {
	dir, path := cacheFixture(t)
	settle(t, dir, path)
	waitTick(t, dir)
	// gamma becomes a copy of beta (a new folder, same name)...
	must(t, os.Rename(filepath.Join(dir, "gamma"), filepath.Join(t.TempDir(), "gamma")))
	must(t, os.CopyFS(filepath.Join(dir, "gamma"), os.DirFS(filepath.Join(dir, "beta"))))
	// ...and alpha a link to a folder outside the dataset holding beta's
	// files too.
	elsewhere := filepath.Join(t.TempDir(), "alpha")
	must(t, os.CopyFS(elsewhere, os.DirFS(filepath.Join(dir, "beta"))))
	must(t, os.RemoveAll(filepath.Join(dir, "alpha")))
	must(t, os.Symlink(elsewhere, filepath.Join(dir, "alpha")))

	got, changed := loadWith(t, dir, path)
	if !changed {
		t.Fatal("the swapped folders were taken from the cache")
	}
	sameTasks(t, got, loadPlain(t, dir))
	for _, i := range []int{0, 2} {
		if string(got[i].Dockerfile) != "FROM python:3.12-slim\n" {
			t.Fatalf("%s: Dockerfile %q, want beta's", got[i].Name, got[i].Dockerfile)
		}
	}
}

// task.toml is recorded parsed: an unchanged one is neither read nor
// parsed again and gives the same TaskConfig; an edit that keeps its size
// and mtime is still seen; a parse recorded by another build (another
// parseIdentity) is not used.
func TestHashCacheTaskTOMLRecordedParsed(t *testing.T) {
	dir, path := cacheFixture(t)
	toml := filepath.Join(dir, "alpha", "task.toml")
	must(t, os.WriteFile(toml, []byte("version = \"1.0\"\n[agent]\ntimeout_sec = 60.0\n[metadata]\ntags = [\"a\", 1]\n"), 0o644))
	settle(t, dir, path)
	hc := OpenHashCache(path)
	_, entries, ok := hc.group(filepath.Join(dir, "alpha"), nil, nil)
	if !ok {
		t.Fatal("alpha is not in the cache")
	}
	for _, e := range entries {
		if e.rel == "task.toml" && (e.parsed == nil || e.hasData) {
			t.Fatalf("task.toml recorded with its bytes (%q), not parsed", e.content)
		}
	}
	hc.release()
	got, changed := loadWith(t, dir, path)
	if changed {
		t.Fatal("an unchanged parsed task.toml was read again")
	}
	sameTasks(t, got, loadPlain(t, dir))

	fi, err := os.Stat(toml)
	must(t, err)
	waitTick(t, dir)
	must(t, os.WriteFile(toml, []byte("version = \"1.0\"\n[agent]\ntimeout_sec = 90.0\n[metadata]\ntags = [\"a\", 1]\n"), 0o644))
	must(t, os.Chtimes(toml, fi.ModTime(), fi.ModTime()))
	got, changed = loadWith(t, dir, path)
	if !changed || got[0].Config.Agent.TimeoutSec != 90 {
		t.Fatalf("the edited task.toml was taken from the cache (timeout %v)", got[0].Config.Agent.TimeoutSec)
	}
	sameTasks(t, got, loadPlain(t, dir))

	// The same file as written by a build with another parser.
	waitTick(t, filepath.Dir(path))
	data, err := os.ReadFile(path)
	must(t, err)
	body := data[:len(data)-32]
	body[len(cacheMagic)] ^= 1
	sum := sha256.Sum256(body)
	must(t, os.WriteFile(path, append(body, sum[:]...), 0o600))
	later := time.Now().Add(time.Minute)
	must(t, os.Chtimes(path, later, later))
	if hc := OpenHashCache(path); hc.Len() != 3 {
		t.Fatalf("the cache of another build holds %d folders, want its 3 (only parses are not used)", hc.Len())
	}
	got, changed = loadWith(t, dir, path)
	if !changed {
		t.Fatal("parses recorded by another build were used")
	}
	sameTasks(t, got, loadPlain(t, dir))
}
