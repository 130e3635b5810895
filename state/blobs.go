package state

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Blobs are content-addressed files under blobs/sha256/<aa>/<hex>: written
// once (temporary file, rename), then read-only. Storing content that is
// already there does nothing. A blob is stored before any record names it,
// and the writer makes every blob stored since its last commit durable
// before the next (syncBlobs: one syncfs for all of them on Linux, not an
// fsync per blob and per folder), so a record never lacks its blob; a crash
// in between leaves at most an orphan blob, which Check lists and which
// harms nothing, or a blob whose content did not reach the disk, which no
// record names. The first blob a writer stores before a sync leaves a
// marker (blobsUnsynced) that a clean Close removes: a writer that finds it
// at Open re-hashes the blobs stored since, and removes those whose
// content is not their name (recoverUnsynced), so that storing that
// content again never takes a torn file for it.

// blobsUnsynced is the marker of a writer that stored blobs it has not
// synced yet (in the store folder).
const blobsUnsynced = "blobs.unsynced"

// ValidSHA256 reports whether s is a lowercase hex SHA-256, the only blob
// names there are.
func ValidSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// BlobPath is where the blob with this SHA-256 lives (or would live). It
// is "" for a string that is no SHA-256.
func (s *Store) BlobPath(sha string) string {
	if !ValidSHA256(sha) {
		return ""
	}
	return filepath.Join(s.dir, blobsDir, "sha256", sha[:2], sha)
}

// Blob reads a blob; the error wraps ErrNotFound when there is none.
func (s *Store) Blob(sha string) ([]byte, error) {
	path := s.BlobPath(sha)
	if path == "" {
		return nil, fmt.Errorf("blob %q: not a SHA-256", sha)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", sha, ErrNotFound)
	}
	return b, err
}

// HasBlob reports whether the blob is stored.
func (s *Store) HasBlob(sha string) bool {
	path := s.BlobPath(sha)
	if path == "" {
		return false
	}
	_, err := os.Stat(path)
	return err == nil
}

// PutBlob stores data and returns its SHA-256 (lowercase hex).
func (s *Store) PutBlob(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	return sha, s.putBlob(sha, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// smallBlob is the size up to which PutBlobFile reads a file into memory.
const smallBlob = 1 << 20

// PutBlobFile stores the content of the file at path and returns its
// SHA-256 and size. The file is read once.
func (s *Store) PutBlobFile(path string) (string, int64, error) {
	if !s.opts.Writer {
		return "", 0, ErrReadOnly
	}
	src, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return "", 0, err
	} else if !st.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() <= smallBlob {
		// Hashed in memory first: content already stored (an empty
		// stderr, a reward of 0) costs no temporary file.
		data, err := io.ReadAll(src)
		if err != nil {
			return "", 0, fmt.Errorf("storing %s: %w", path, err)
		}
		sha, err := s.PutBlob(data)
		if err != nil {
			return "", 0, fmt.Errorf("storing %s: %w", path, err)
		}
		return sha, int64(len(data)), nil
	}
	sha, size, err := s.PutBlobReader(src)
	if err != nil {
		return "", 0, fmt.Errorf("storing %s: %w", path, err)
	}
	return sha, size, nil
}

// PutBlobReader stores everything r yields and returns its SHA-256 and
// size; r is read once.
func (s *Store) PutBlobReader(r io.Reader) (string, int64, error) {
	if !s.opts.Writer {
		return "", 0, ErrReadOnly
	}
	tmp, err := s.blobTemp()
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	size, err := io.Copy(io.MultiWriter(tmp, h), r)
	if err != nil {
		discard(tmp)
		return "", 0, err
	}
	sha := hex.EncodeToString(h.Sum(nil))
	if s.HasBlob(sha) {
		discard(tmp)
		return sha, size, nil
	}
	if err := s.installBlob(tmp, sha); err != nil {
		return "", 0, err
	}
	return sha, size, nil
}

func (s *Store) putBlob(sha string, write func(io.Writer) error) error {
	if !s.opts.Writer {
		return ErrReadOnly
	}
	if s.HasBlob(sha) {
		return nil
	}
	tmp, err := s.blobTemp()
	if err != nil {
		return err
	}
	if err := write(tmp); err != nil {
		discard(tmp)
		return fmt.Errorf("storing blob %s: %w", sha, err)
	}
	return s.installBlob(tmp, sha)
}

// blobTemp is a temporary file in the blob folder, on the same file system
// as the blobs so that the final rename is atomic.
func (s *Store) blobTemp() (*os.File, error) {
	dir := filepath.Join(s.dir, blobsDir, "sha256")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return os.CreateTemp(dir, ".tmp-*")
}

func discard(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

// installBlob makes tmp read-only and renames it to its final name; the
// next commit makes it durable first (syncBlobs).
func (s *Store) installBlob(tmp *os.File, sha string) error {
	final := s.BlobPath(sha)
	if err := s.markUnsynced(); err != nil {
		discard(tmp)
		return fmt.Errorf("storing blob %s: %w", sha, err)
	}
	if err := tmp.Chmod(0o444); err != nil {
		discard(tmp)
		return fmt.Errorf("storing blob %s: %w", sha, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("storing blob %s: %w", sha, err)
	}
	// The rename first: its folder (one of 256) is there but for the
	// first blobs of a store, and a mkdir that finds it costs as much.
	newDir := false
	err := os.Rename(tmp.Name(), final)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(filepath.Dir(final), 0o755); err == nil {
			newDir = true
		} else if !errors.Is(err, fs.ErrExist) {
			if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
				os.Remove(tmp.Name())
				return err
			}
			newDir = true
		}
		err = os.Rename(tmp.Name(), final)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("storing blob %s: %w", sha, err)
	}
	s.blobMu.Lock()
	if s.blobDirs == nil {
		s.blobDirs = map[string]struct{}{}
	}
	s.blobFiles = append(s.blobFiles, final)
	s.blobDirs[filepath.Dir(final)] = struct{}{}
	if newDir {
		s.blobDirs[filepath.Dir(filepath.Dir(final))] = struct{}{}
	}
	s.blobMu.Unlock()
	return nil
}

// markUnsynced leaves the blobsUnsynced marker, durably, before the first
// blob a writer stores without syncing it.
func (s *Store) markUnsynced() error {
	s.blobMu.Lock()
	defer s.blobMu.Unlock()
	if s.marked {
		return nil
	}
	if err := ensureFile(filepath.Join(s.dir, blobsUnsynced)); err != nil {
		return err
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	s.marked = true
	return nil
}

// unmarkUnsynced removes the marker once every blob is synced (Close).
func (s *Store) unmarkUnsynced() {
	s.blobMu.Lock()
	defer s.blobMu.Unlock()
	if s.marked && len(s.blobFiles) == 0 {
		_ = os.Remove(filepath.Join(s.dir, blobsUnsynced))
		s.marked = false
	}
}

// recoverUnsynced runs when a writer opens the store: when the marker of
// a writer that stopped before it synced its blobs is there, every blob
// stored since the marker was made is hashed, and one whose content is not
// its name (a crash took its content, not its name) is removed. No record
// names it: records are committed only after their blobs are synced.
func (s *Store) recoverUnsynced() error {
	marker := filepath.Join(s.dir, blobsUnsynced)
	st, err := os.Stat(marker)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	since := st.ModTime().Add(-2 * time.Second) // coarse file-system clocks
	root := filepath.Join(s.dir, blobsDir, "sha256")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			if info, err := d.Info(); err == nil && path != root && info.ModTime().Before(since) {
				return filepath.SkipDir // no blob was renamed into it since
			}
			return nil
		}
		info, err := d.Info()
		if err != nil || info.ModTime().Before(since) || !ValidSHA256(d.Name()) {
			return nil
		}
		if sum, err := hashFile(path); err != nil || sum != d.Name() {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("checking the blobs a stopped writer stored: %w", err)
	}
	if err := syncDir(root); err != nil {
		return err
	}
	return os.Remove(marker)
}

// syncBlobs makes the blobs stored since it last ran durable, their
// content and their names, before the next commit (and at Close): on the
// store's writer rather than on the path of whoever stored the blob, and
// once for every blob of the batch. On Linux that is one syncfs(2) of the
// store's file system (about 0.3 ms of CPU, where an fsync of each blob and
// of each folder it went into cost 0.2 and 0.07 ms each); elsewhere an
// fsync of each blob, then of each folder.
func (s *Store) syncBlobs() error {
	s.blobMu.Lock()
	files, dirs := s.blobFiles, s.blobDirs
	s.blobFiles, s.blobDirs = nil, nil
	s.blobMu.Unlock()
	if len(files) == 0 && len(dirs) == 0 {
		return nil
	}
	err := syncAll(s.dir, files, dirs)
	if err != nil {
		s.blobMu.Lock()
		s.blobFiles = append(s.blobFiles, files...)
		if s.blobDirs == nil {
			s.blobDirs = map[string]struct{}{}
		}
		for d := range dirs {
			s.blobDirs[d] = struct{}{}
		}
		s.blobMu.Unlock()
	}
	return err
}

// syncEach fsyncs each file, then each folder.
func syncEach(files []string, dirs map[string]struct{}) error {
	for _, f := range files {
		if err := syncDir(f); err != nil {
			return err
		}
	}
	for d := range dirs {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// syncDir makes a rename in dir durable (or a file's content, given a
// file).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
