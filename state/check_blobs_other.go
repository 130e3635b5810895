//go:build !linux

package state

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// hashAt hashes the regular file name in the open folder dir into sum and
// returns its permissions.
func (w *blobWorker) hashAt(dir *os.File, name string, sum *blobKey) (fs.FileMode, error) {
	return w.hash(filepath.Join(dir.Name(), name), sum)
}

// hash reads the regular file at path into sum, and returns its
// permissions: one open, one stat of what was opened, and reads until its
// size is read, through one buffer.
func (w *blobWorker) hash(path string, sum *blobKey) (fs.FileMode, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	w.h.Reset()
	size, read := info.Size(), int64(0)
	for read < size {
		n, err := f.Read(w.buf)
		w.h.Write(w.buf[:n])
		read += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	w.h.Sum(sum[:0])
	return info.Mode().Perm(), nil
}
