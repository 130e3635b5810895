package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
	"unsafe"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// A state.db damaged on disk (truncated, bytes flipped, emptied) must never
// crash a command: bbolt trusts its file and panics, or faults on its
// memory map, when a page is not what it should be. Every transaction hemra
// runs goes through guard, which turns those into a *DamagedError that says
// what is wrong, where, and how to restore the last good copy
// (docs/state.md, "A damaged state file").

// DamagedError says state.db cannot be read as the state it should be.
type DamagedError struct {
	// Path is the state file.
	Path string
	// Detail is what is wrong and where: "truncated to 8192 bytes, its pages
	// need 32768", "page 2: has unexpected type/flags: fd".
	Detail string
	// Backup is the last good copy, "" when there is none.
	Backup string
	// BackupMeta and BackupTime say what the backup holds.
	BackupMeta Meta
	BackupTime time.Time
}

func (e *DamagedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the state file %s is damaged: %s", e.Path, e.Detail)
	b.WriteString("\nhemra will not read or write it: nothing was changed.")
	if e.Backup != "" {
		fmt.Fprintf(&b, "\nThe last good copy is %s (serial %d, taken %s by an apply).",
			e.Backup, e.BackupMeta.Serial, e.BackupTime.UTC().Format("2006-01-02 15:04:05 UTC"))
		fmt.Fprintf(&b, "\nTo restore it (docs/state.md, \"A damaged state file\"), with no hemra apply running:\n  ")
		if _, err := os.Stat(e.Path); err == nil {
			fmt.Fprintf(&b, "mv %s %s.damaged && ", e.Path, e.Path)
		}
		fmt.Fprintf(&b, "cp %s %s && hemra state check", e.Backup, e.Path)
	} else {
		fmt.Fprintf(&b, "\nThere is no backup (%s is written by an apply that recorded something).", filepath.Join(filepath.Dir(e.Path), backupFile))
		fmt.Fprintf(&b, "\nMove the store aside (mv %s %s.damaged) to start a new state; the blobs and event logs in it stay readable (docs/state.md, \"A damaged state file\").", filepath.Dir(e.Path), filepath.Dir(e.Path))
	}
	return b.String()
}

// ErrDamaged is matched by errors.Is for every *DamagedError.
var ErrDamaged = errors.New("the state file is damaged")

func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

// damaged makes the error for state.db in dir, naming its backup when one
// can be read.
func damaged(dir, detail string) *DamagedError {
	e := &DamagedError{Path: filepath.Join(dir, dbFile), Detail: detail}
	if m, at, err := readBackupMeta(dir); err == nil {
		e.Backup, e.BackupMeta, e.BackupTime = filepath.Join(dir, backupFile), m, at
	}
	return e
}

// guard runs fn, turning a panic or a memory fault that bbolt raises on a
// damaged file into a *DamagedError. A panic that does not come from
// reading state.db (a bug in a caller's callback) is raised again.
func (s *Store) guard(fn func() error) error { return guard(s.dir, fn) }

func guard(dir string, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		r := recover()
		debug.SetPanicOnFault(old)
		if r == nil {
			return
		}
		if !fromDamage(r) {
			panic(r)
		}
		err = damaged(dir, panicDetail(r))
	}()
	return fn()
}

// fromDamage tells a panic raised by reading a damaged file (inside bbolt,
// or a fault on its memory map) from any other.
func fromDamage(r any) bool {
	if re, ok := r.(runtime.Error); ok {
		if f, ok := re.(interface{ Addr() uintptr }); ok && f.Addr() >= 4096 {
			return true // a fault on a mapped page, not a nil dereference
		}
	}
	// The function that panicked: the first frame below the deferred
	// recover that is neither the runtime nor this function.
	pcs := make([]uintptr, 32)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		name := f.Function
		if !strings.HasPrefix(name, "runtime.") && !strings.Contains(name, "hemra/state.guard") {
			return strings.HasPrefix(name, "go.etcd.io/bbolt")
		}
		if !more {
			return false
		}
	}
}

func panicDetail(r any) string {
	msg := fmt.Sprint(r)
	msg = strings.TrimPrefix(msg, "assertion failed: ")
	if strings.Contains(msg, "fault") {
		return "reading it faulted (" + msg + "): a page points outside the file"
	}
	if _, ok := r.(runtime.Error); ok {
		return "bbolt failed reading it (" + msg + ")"
	}
	return msg
}

// boltDamage turns the errors bbolt returns for a file that is not a
// valid database into a *DamagedError.
func (s *Store) boltDamage(err error) error {
	if err == nil {
		return nil
	}
	if strings.HasPrefix(err.Error(), "file size too small") {
		return damaged(s.dir, err.Error()+" bytes: shorter than its two meta pages")
	}
	for _, known := range []error{bolterrors.ErrInvalid, bolterrors.ErrChecksum, bolterrors.ErrVersionMismatch, bolterrors.ErrInvalidMapping} {
		if errors.Is(err, known) {
			return damaged(s.dir, err.Error())
		}
	}
	return err
}

// checkSize refuses a state.db shorter than the pages its meta page says
// it has: bbolt would fault reading them.
func (s *Store) checkSize(tx *bolt.Tx) error {
	st, err := os.Stat(tx.DB().Path())
	if err != nil {
		return err
	}
	if need := tx.Size(); st.Size() < need {
		return damaged(s.dir, fmt.Sprintf("truncated to %d bytes, but its pages need %d", st.Size(), need))
	}
	return nil
}

// lostState refuses a state.db that is missing or empty while the store
// holds what only a recorded state leaves (blobs, event logs, a backup):
// reading it as an empty state would run every attempt again.
func (s *Store) lostState(missing bool) error {
	what := s.traces()
	if what == "" {
		return nil
	}
	detail := fmt.Sprintf("it is empty (0 bytes), but the store holds %s", what)
	if missing {
		detail = fmt.Sprintf("it is missing, but the store holds %s", what)
	}
	return damaged(s.dir, detail)
}

// traces names what the store holds that only a recorded state leaves, ""
// when nothing.
func (s *Store) traces() string {
	var found []string
	if _, err := os.Stat(filepath.Join(s.dir, backupFile)); err == nil {
		found = append(found, "a backup ("+backupFile+")")
	}
	if nonEmptyDir(filepath.Join(s.dir, eventsDir)) {
		found = append(found, "event logs")
	}
	if nonEmptyDir(filepath.Join(s.dir, blobsDir, "sha256")) {
		found = append(found, "blobs")
	}
	return strings.Join(found, ", ")
}

func nonEmptyDir(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return err == nil && len(names) > 0
}

// verify reads every page of the state reachable from its root, checking
// that each key and value lies inside the file, then runs bbolt's own
// consistency check (freelist, unreachable and doubly used pages, key
// order). It returns at most max problems, each naming a page or a key.
// Call it inside guard: a page damaged badly enough panics.
func verify(tx *bolt.Tx, max int) []string {
	var problems []string
	add := func(p string) bool {
		problems = append(problems, p)
		return len(problems) < max
	}
	info := tx.DB().Info()
	lo, hi := info.Data, info.Data+uintptr(tx.Size())
	inFile := func(b []byte) bool {
		if len(b) == 0 {
			return true
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		return p >= lo && p+uintptr(len(b)) <= hi
	}
	stop := errors.New("stop")
	var walk func(path string, b *bolt.Bucket) error
	walk = func(path string, b *bolt.Bucket) error {
		// An inline bucket (root 0) lives inside its parent's leaf and may
		// be read from a copy: only pages are checked for bounds.
		paged := b.Root() != 0
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if paged && (!inFile(k) || !inFile(v)) {
				if !add(fmt.Sprintf("%s: key %q lies outside the file's pages", path, truncKey(k))) {
					return stop
				}
				continue
			}
			if v == nil {
				if sub := b.Bucket(k); sub != nil {
					if err := walk(path+"/"+string(k), sub); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		if !inFile(name) {
			add(fmt.Sprintf("bucket name at %p lies outside the file's pages", unsafe.SliceData(name)))
			return stop
		}
		return walk(string(name), b)
	})
	if err != nil || len(problems) > 0 {
		return problems
	}
	for err := range tx.Check() {
		if len(problems) < max {
			msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "panic: "), "assertion failed: ")
			problems = append(problems, "bbolt check: "+msg)
		}
	}
	return problems
}

func truncKey(k []byte) string {
	if len(k) > 64 {
		return string(k[:64]) + "..."
	}
	return string(k)
}

// statSize is the size of state.db, and whether it exists.
func statSize(path string) (int64, bool, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return st.Size(), true, nil
}
