//go:build !linux

package dataset

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
)

// dirRef is an open folder of a task. Outside Linux it is just its path and
// the os package does the work.
type dirRef struct {
	path string
}

// cacheSupported: the hash cache needs ctime and inode numbers, which only
// the Linux reader gets; elsewhere every file is read.
const cacheSupported = false

var errNoCache = errors.New("the file hash cache is used on Linux only")

func (r *taskReader) statAt(d dirRef, name string, st *fileStat) error { return errNoCache }
func (r *taskReader) statDir(d dirRef, st *fileStat) error             { return errNoCache }
func (st *fileStat) isRegular() bool                                   { return false }
func (st *fileStat) isDir() bool                                       { return false }

func openDir(path string) (dirRef, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return dirRef{}, err
	}
	if !fi.IsDir() {
		return dirRef{}, &os.PathError{Op: "open", Path: path, Err: errNotDir}
	}
	return dirRef{path: path}, nil
}

func (r *taskReader) openSubdir(d dirRef, name string) (dirRef, error) {
	return dirRef{path: filepath.Join(d.path, name)}, nil
}

func (d dirRef) unopened(name string) dirRef { return dirRef{path: filepath.Join(d.path, name)} }

func (d dirRef) close() {}

func (r *taskReader) list(d dirRef) ([]dirEntry, error) {
	f, err := os.Open(d.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := make([]dirEntry, len(entries))
	for i, e := range entries {
		out[i] = dirEntry{name: e.Name(), typ: e.Type()}
	}
	return out, nil
}

func (r *taskReader) readFileAt(d dirRef, name string, keep bool, _ *fileStat) (File, []byte, error) {
	fh, err := os.Open(filepath.Join(d.path, name))
	if err != nil {
		return File{}, nil, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return File{}, nil, err
	}
	if !fi.Mode().IsRegular() {
		return File{}, nil, &os.PathError{Op: "open", Path: fh.Name(), Err: errNotRegular}
	}
	if limit := keptLimit(name); keep && fi.Size() > limit {
		return File{}, nil, &os.PathError{Op: "read", Path: fh.Name(), Err: &tooLargeError{size: fi.Size(), limit: limit}}
	}
	f := File{Mode: 0o644}
	if fi.Mode()&0o111 != 0 {
		f.Mode = 0o755
	}
	var sum [sha256.Size]byte
	var data []byte
	size := fi.Size()
	switch {
	case keep || size <= int64(len(r.buf)):
		var b []byte
		if keep {
			b = make([]byte, size)
		} else {
			b = r.buf[:size:size]
		}
		n, err := io.ReadFull(fh, b)
		if err != nil && err != io.ErrUnexpectedEOF {
			return File{}, nil, err
		}
		sum = sha256.Sum256(b[:n])
		f.Size = int64(n)
		if keep {
			data = b[:n]
		}
	default:
		h := sha256.New()
		n, err := io.CopyBuffer(h, io.LimitReader(fh, size), r.buf)
		if err != nil {
			return File{}, nil, err
		}
		h.Sum(sum[:0])
		f.Size = n
	}
	f.SHA256 = hex.EncodeToString(sum[:])
	return f, data, nil
}

func readLinkAt(d dirRef, name string) (string, error) {
	return os.Readlink(filepath.Join(d.path, name))
}
