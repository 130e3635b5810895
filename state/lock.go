package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// ErrLocked is returned by a writer Open while another writer holds the
// store. Its fields come from the holder's writer.lock file; they are zero
// when the holder had not written them yet.
type ErrLocked struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Command string    `json:"command,omitempty"`
	Since   time.Time `json:"since"`
	// Waited is how long Open retried before giving up (Options.LockTimeout).
	Waited time.Duration `json:"-"`
}

func (e *ErrLocked) Error() string {
	if e.PID == 0 {
		return "state is locked by another hemra process"
	}
	msg := fmt.Sprintf("state is locked by pid %d on %s", e.PID, e.Host)
	if e.Command != "" {
		msg += " (" + e.Command + ")"
	}
	msg += " since " + e.Since.Local().Format("2006-01-02 15:04:05 MST")
	if e.Waited > 0 {
		msg += fmt.Sprintf("; gave up after waiting %s", e.Waited)
	}
	return msg
}

// LockInfo is who holds the store's writer lock: a running apply.
type LockInfo struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Command string    `json:"command,omitempty"`
	Since   time.Time `json:"since"`
}

// String is "pid N on HOST since T" (T in UTC), or "another hemra
// process" when the holder has not written its details yet.
func (l *LockInfo) String() string {
	if l.PID == 0 {
		return "another hemra process"
	}
	return fmt.Sprintf("pid %d on %s since %s", l.PID, l.Host, l.Since.UTC().Format("2006-01-02 15:04:05 UTC"))
}

// WriterActive says whether another process holds the store's writer lock
// now (an apply is running), and who. It never waits and never takes the
// lock: a writer empties writer.lock when it lets go, so an empty or
// missing file answers at once; only a file left behind by a killed
// writer, or a live one, costs a non-blocking probe of the lock. A lock
// held by this process (an apply planning under its own lock) is not
// another writer.
func (s *Store) WriterActive() (*LockInfo, bool) {
	path := filepath.Join(s.dir, lockFile)
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return nil, false
	}
	var h lockHolder
	_ = json.Unmarshal(b, &h)
	host, _ := os.Hostname()
	if h.PID == os.Getpid() && h.Host == host {
		return nil, false
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if err == nil {
		// Nobody holds it: the details are a killed writer's.
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return nil, false
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, false
	}
	return &LockInfo{PID: h.PID, Host: h.Host, Command: h.Command, Since: h.Since}, true
}

// lockHolder is what a writer writes into writer.lock.
type lockHolder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Command string    `json:"command,omitempty"`
	Since   time.Time `json:"since"`
}

// lockRetry is how often a waiting writer retries writer.lock.
const lockRetry = 50 * time.Millisecond

// takeWriterLock opens path and takes an exclusive flock on it, retrying
// until timeout, then records the holder in it. The lock dies with the
// process, so a killed hemra never leaves a stale lock behind.
func takeWriterLock(path, command string, timeout time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the writer lock: %w", err)
	}
	start := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if time.Since(start) >= timeout {
			f.Close()
			locked := readLockHolder(path)
			if timeout > 0 {
				locked.Waited = timeout
			}
			return nil, locked
		}
		time.Sleep(min(lockRetry, max(timeout-time.Since(start), time.Millisecond)))
	}
	host, _ := os.Hostname()
	info, _ := json.Marshal(lockHolder{PID: os.Getpid(), Host: host, Command: command, Since: time.Now().UTC().Truncate(time.Second)})
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(append(info, '\n'), 0)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return f, nil
}

// releaseWriterLock empties the lock file, so that no stale holder is ever
// shown, and lets go of the lock.
func releaseWriterLock(f *os.File) error {
	_ = f.Truncate(0)
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readLockHolder reads who holds writer.lock. A holder that has not written
// its details yet gives zero fields.
func readLockHolder(path string) *ErrLocked {
	var h lockHolder
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &h)
	}
	return &ErrLocked{PID: h.PID, Host: h.Host, Command: h.Command, Since: h.Since}
}

// pollFlock takes a flock on f, shared or exclusive, retrying every
// millisecond at most until timeout. bbolt's own flock retries every 50 ms,
// which would let a waiting reader or writer miss its turn; taking the lock
// here first makes bbolt's later flock on the same descriptor a no-op.
func pollFlock(f *os.File, exclusive bool, timeout time.Duration) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	start := time.Now()
	delay := 100 * time.Microsecond
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if time.Since(start) >= timeout {
			return errBusy
		}
		time.Sleep(delay)
		delay = min(2*delay, time.Millisecond)
	}
}

var errBusy = errors.New("busy")
