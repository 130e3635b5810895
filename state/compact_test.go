package state

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// dumpAll is every bucket of the bbolt file at path, nested ones too, as
// "path/key" → value, and each bucket's sequence as "path/#seq".
func dumpAll(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]string{}
	var walk func(prefix string, b *bolt.Bucket) error
	walk = func(prefix string, b *bolt.Bucket) error {
		out[prefix+"/#seq"] = fmt.Sprint(b.Sequence())
		return b.ForEach(func(k, v []byte) error {
			if v == nil && b.Bucket(k) != nil {
				return walk(prefix+"/"+string(k), b.Bucket(k))
			}
			out[prefix+"/"+string(k)] = string(v)
			return nil
		})
	}
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name), b) })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// compactable is a store with attempts, an imported one, a nested bucket
// with sequences and an empty value, and free pages left by a deleted
// bucket: what Compact must keep, and what it must drop.
func compactable(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeAttempts(t, dir)
	importAttempt(t, dir)
	db, err := bolt.Open(filepath.Join(dir, dbFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		junk, err := tx.CreateBucket([]byte("junk"))
		if err != nil {
			return err
		}
		for i := range 2000 {
			if err := junk.Put([]byte(fmt.Sprintf("%06d", i)), bytes.Repeat([]byte("x"), 1000)); err != nil {
				return err
			}
		}
		outer, err := tx.CreateBucket([]byte("x-nested"))
		if err != nil {
			return err
		}
		_ = outer.SetSequence(7)
		inner, err := outer.CreateBucket([]byte("inner"))
		if err != nil {
			return err
		}
		_ = inner.SetSequence(42)
		if err := inner.Put([]byte("empty"), nil); err != nil {
			return err
		}
		return inner.Put([]byte("k"), []byte("v"))
	})
	if err == nil {
		err = db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("junk")) })
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCompactKeepsEveryKeyAndValue(t *testing.T) {
	dir := compactable(t)
	path := filepath.Join(dir, dbFile)
	want := dumpAll(t, path)
	if want["x-nested/inner/#seq"] != "42" || want["x-nested/#seq"] != "7" {
		t.Fatalf("the test store lacks its nested bucket: %v", want)
	}
	before, _, _ := statSize(path)
	r, _ := Open(dir, Options{})
	meta, err := r.Meta()
	if err != nil {
		t.Fatal(err)
	}

	rep, err := Compact(dir, Options{})
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	got := dumpAll(t, path)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s after Compact: %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: only after Compact", k)
		}
	}
	after, _, _ := statSize(path)
	if rep.BytesBefore != before || rep.BytesAfter != after || after >= before/2 {
		t.Errorf("report %+v; state.db %d → %d bytes, want it under half", rep, before, after)
	}
	if rep.FormatBefore != FormatVersion || rep.FormatAfter != FormatVersion || rep.Keys != int64(len(want)-rep.Buckets) /* the nested bucket's two #seq entries, one its key */ {
		t.Errorf("report %+v for %d entries", rep, len(want))
	}
	if m, err := r.Meta(); err != nil || m != meta {
		t.Errorf("meta after Compact %+v, %v; want %+v unchanged", m, err, meta)
	}
	// The backup is the compacted state.
	if rep.Backup != filepath.Join(dir, backupFile) {
		t.Errorf("report names backup %q", rep.Backup)
	}
	if b := dumpAll(t, rep.Backup); fmt.Sprint(b) != fmt.Sprint(want) {
		t.Errorf("the backup after Compact holds another state")
	}
	if bs, _, _ := statSize(rep.Backup); bs > after {
		t.Errorf("backup %d bytes, state.db %d", bs, after)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("state.db after Compact: %v, %v; want mode 0600", st.Mode(), err)
	}
	// A writer and a reader go on as before.
	w, err := Open(dir, Options{Writer: true})
	if err != nil {
		t.Fatalf("writer Open after Compact: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if a, err := r.CurrentAttempt("import/j/oracle/hello#1"); err != nil || a.Origin == nil {
		t.Errorf("imported attempt after Compact: %v, %v", a, err)
	}
	leftovers(t, dir)
}

// Compact of an older format upgrades it first, as a writer's open does.
func TestCompactUpgradesFirst(t *testing.T) {
	fresh, old := t.TempDir(), t.TempDir()
	writeAttempts(t, fresh, old)
	writeV5(t, old)
	rep, err := Compact(old, Options{})
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if rep.FormatBefore != 5 || rep.FormatAfter != FormatVersion {
		t.Errorf("report %+v; want format 5 → %d", rep, FormatVersion)
	}
	if got, want := dump(t, old), dump(t, fresh); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the upgraded, compacted store differs from one written new")
	}
}

func TestCompactRefusesWhileLocked(t *testing.T) {
	dir := compactable(t)
	path := filepath.Join(dir, dbFile)
	orig, _ := os.ReadFile(path)
	w, err := Open(dir, Options{Writer: true, Command: "hemra apply"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, err = Compact(dir, Options{Command: "hemra state compact"})
	var locked *ErrLocked
	if !errors.As(err, &locked) || locked.Command != "hemra apply" || !strings.Contains(err.Error(), "state is locked by pid") {
		t.Fatalf("Compact while a writer holds the lock: %v, want *ErrLocked naming hemra apply", err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, orig) {
		t.Error("a refused Compact changed state.db")
	}
	leftovers(t, dir)
}

// A Compact that fails at any step leaves state.db as it was and no copy
// behind.
func TestCompactErrorLeavesOriginal(t *testing.T) {
	for _, at := range []string{"copied", "verified", "rename"} {
		t.Run(at, func(t *testing.T) {
			dir := compactable(t)
			path := filepath.Join(dir, dbFile)
			orig, _ := os.ReadFile(path)
			origBackup, _ := os.ReadFile(filepath.Join(dir, backupFile))
			compactFault = func(step string) error {
				if step == at {
					return errors.New("injected")
				}
				return nil
			}
			defer func() { compactFault = nil }()
			if _, err := Compact(dir, Options{}); err == nil || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("Compact failing at %s: %v", at, err)
			}
			if now, _ := os.ReadFile(path); !bytes.Equal(now, orig) {
				t.Error("a failed Compact changed state.db")
			}
			if now, _ := os.ReadFile(filepath.Join(dir, backupFile)); !bytes.Equal(now, origBackup) {
				t.Error("a failed Compact changed the backup")
			}
			leftovers(t, dir)
		})
	}
	t.Run("read-only folder", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes into a read-only folder")
		}
		dir := compactable(t)
		path := filepath.Join(dir, dbFile)
		orig, _ := os.ReadFile(path)
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o700)
		if _, err := Compact(dir, Options{}); err == nil {
			t.Fatal("Compact in a read-only folder succeeded")
		}
		if now, _ := os.ReadFile(path); !bytes.Equal(now, orig) {
			t.Error("a failed Compact changed state.db")
		}
		leftovers(t, dir)
	})
}

// A copy a killed Compact left is removed by the next; a store that does
// not exist is refused, not created.
func TestCompactLeftoversAndNoState(t *testing.T) {
	dir := compactable(t)
	if err := os.WriteFile(filepath.Join(dir, compactFile+"123"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Compact(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	leftovers(t, dir)

	none := filepath.Join(t.TempDir(), ".hemra")
	if _, err := Compact(none, Options{}); err == nil || !strings.Contains(err.Error(), "no state to compact") {
		t.Errorf("Compact of no store: %v", err)
	}
	if _, err := os.Stat(none); err == nil {
		t.Error("Compact of no store created it")
	}
}

func leftovers(t *testing.T, dir string) {
	t.Helper()
	if m, _ := filepath.Glob(filepath.Join(dir, compactFile+"*")); len(m) > 0 {
		t.Errorf("left behind: %v", m)
	}
}

// Readers go on reading while Compact runs: the old file until the
// rename, the compacted one after, never an error.
func TestCompactWhileReading(t *testing.T) {
	dir := compactable(t)
	r, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	errs := make(chan error, 1)
	reads := 0
	go func() {
		defer close(errs)
		for {
			select {
			case <-stop:
				return
			default:
			}
			a, err := r.CurrentAttempt("import/j/oracle/hello#1")
			if err != nil || a.Origin == nil {
				errs <- fmt.Errorf("read %d: %v, %v", reads, a, err)
				return
			}
			reads++
		}
	}()
	for range 5 {
		if _, err := Compact(dir, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-errs; err != nil {
		t.Error(err)
	}
	if reads == 0 {
		t.Error("no read ran during the compactions")
	}
}
