package state

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// hashAt hashes the regular file name in the open folder dir into sum and
// returns its permissions, in the fewest system calls: openat, fstat, the
// reads, close (os.Open would add an fstat of its own, and a path walked
// from the root for each of a million blobs).
func (w *blobWorker) hashAt(dir *os.File, name string, sum *blobKey) (fs.FileMode, error) {
	fail := func(op string, err error) (fs.FileMode, error) {
		return 0, &fs.PathError{Op: op, Path: filepath.Join(dir.Name(), name), Err: err}
	}
	var fd int
	var err error
	for {
		fd, err = syscall.Openat(int(dir.Fd()), name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return fail("open", err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fail("stat", err)
	}
	w.h.Reset()
	for read := int64(0); read < st.Size; {
		n, err := syscall.Read(fd, w.buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return fail("read", err)
		}
		if n == 0 {
			break
		}
		w.h.Write(w.buf[:n])
		read += int64(n)
	}
	w.h.Sum(sum[:0])
	return fs.FileMode(st.Mode & 0o777), nil
}
