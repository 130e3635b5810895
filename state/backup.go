package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// backupFile is the last good copy of state.db, as Terraform keeps
// terraform.tfstate.backup: the state as the latest writer (an apply) left
// it when it closed the store, or found it when it opened the store after
// one that was killed, each time after the state passed bbolt's
// consistency check. docs/state.md says how to restore it.
const backupFile = "state.db.backup"

// BackupPath is the store's last good copy of state.db.
func (s *Store) BackupPath() string { return filepath.Join(s.dir, backupFile) }

// readBackupMeta is the lineage and serial the backup holds, and when it
// was written.
func readBackupMeta(dir string) (Meta, time.Time, error) {
	path := filepath.Join(dir, backupFile)
	st, err := os.Stat(path)
	if err != nil {
		return Meta{}, time.Time{}, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return Meta{}, time.Time{}, err
	}
	defer db.Close()
	var m Meta
	err = guard(dir, func() error {
		return db.View(func(tx *bolt.Tx) error {
			if tx.Size() > st.Size() {
				return errors.New("the backup is truncated")
			}
			var err error
			m, err = (&View{tx: tx}).Meta()
			return err
		})
	})
	return m, st.ModTime(), err
}

// Backups are copies of the whole of state.db, and so is the check that
// comes before each: a cost that grows with the state, where an apply's
// own grows with its attempts. A state that changed since its backup is
// copied again at once while it is small (backupAlways), and otherwise
// once the backup is older than one second per backupRate of state.db:
// about every 7 minutes at 100,000 attempts (437 MB), every hour at
// 1,000,000, so copying costs a long-running writer about 1% of its time
// whatever the state's size, and an apply of a few thousand attempts into
// a big state does not pay a copy of all of it. What a damaged state.db
// loses is then what was recorded since the backup, at most that long.
var (
	backupAlways int64 = 64 << 20
	backupRate   int64 = 1 << 20 // bytes of state.db per second of backup age
)

// backupDue reports whether a state of dbSize bytes that changed since
// its backup is copied now: there is no readable backup, it is of another
// lineage than cur (when known), the state is small, or the backup is
// older than the state's size allows (backupRate).
func (s *Store) backupDue(dbSize int64, cur *Meta) bool {
	b, at, err := readBackupMeta(s.dir)
	switch {
	case err != nil, cur != nil && b.Lineage != cur.Lineage, dbSize <= backupAlways:
		return true
	}
	return time.Since(at) >= time.Duration(dbSize/backupRate)*time.Second
}

// verifyAndBackup runs when a writer opens the store (before any write),
// the writer lock held: it checks the whole of state.db (verify) and
// refuses a damaged one, so an apply never adds to a damaged state, then
// copies it to state.db.backup when the state changed since the backup was
// taken and a copy is due (backupDue). It runs again when the writer
// closes the store after writing, when a copy is due then. The copy is
// written to a temporary file, synced and renamed over the old backup, so
// a crash leaves the previous backup whole.
func (s *Store) verifyAndBackup() error { return s.verifyAndMaybeBackup(false) }

// closingBackup is verifyAndBackup for a writer that closes the store
// after writing: nothing at all when no copy is due, the check included
// (the state was checked when the writer opened it, and only it wrote).
func (s *Store) closingBackup() error {
	size, _, err := statSize(filepath.Join(s.dir, dbFile))
	if err != nil {
		return err
	}
	if !s.backupDue(size, nil) {
		return nil
	}
	return s.verifyAndMaybeBackup(true)
}

func (s *Store) verifyAndMaybeBackup(due bool) error {
	db, err := s.openDB(false)
	if err != nil {
		return err
	}
	defer db.Close()
	return s.guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			if err := s.checkSize(tx); err != nil {
				return err
			}
			if problems := verify(tx, 5); len(problems) > 0 {
				detail := problems[0]
				if len(problems) > 1 {
					detail += fmt.Sprintf(" (and %d more problems: hemra state check lists them)", len(problems)-1)
				}
				return damaged(s.dir, detail)
			}
			m, err := (&View{tx: tx}).Meta()
			if err != nil {
				return err
			}
			if m.Serial == 0 {
				return nil // nothing recorded yet
			}
			if b, _, err := readBackupMeta(s.dir); err == nil && b == m {
				return nil
			}
			if !due && !s.backupDue(tx.Size(), &m) {
				return nil
			}
			return s.writeBackup(tx)
		})
	})
}

func (s *Store) writeBackup(tx *bolt.Tx) error {
	tmp, err := os.CreateTemp(s.dir, backupFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("backing up the state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tx.WriteTo(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("backing up the state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("backing up the state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("backing up the state: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.BackupPath()); err != nil {
		return fmt.Errorf("backing up the state: %w", err)
	}
	return syncDir(s.dir)
}
