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
)

// Blobs are content-addressed files under blobs/sha256/<aa>/<hex>: written
// once (temporary file, fsync, rename), then read-only. Storing content that
// is already there does nothing. A blob is stored before any record names
// it, so a record never lacks its blob; a crash in between leaves at most an
// orphan blob, which Check lists and which harms nothing.

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
	if st, err := src.Stat(); err != nil {
		return "", 0, err
	} else if !st.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is not a regular file", path)
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

// installBlob makes tmp durable and read-only, then renames it to its
// final name, so a blob's path only ever holds its complete content.
func (s *Store) installBlob(tmp *os.File, sha string) error {
	final := s.BlobPath(sha)
	if err := tmp.Sync(); err != nil {
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
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("storing blob %s: %w", sha, err)
	}
	return syncDir(filepath.Dir(final))
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
