//go:build linux

package dataset

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// On Linux, task folders are read with openat(2) relative to an open folder
// and getdents64(2) directly: no path walks per file, no poller
// registration, no sorting. That halves the syscalls of os.Open/ReadDir and
// is most of what loading 10,000 tasks costs.

// dirRef is an open folder of a task.
type dirRef struct {
	fd int
	// path names the folder in os.PathErrors: the full path for a task's
	// root, the bare name for a subfolder. Diagnostics name files by the
	// task-relative path the walk tracks (fileError), not by this.
	path string
	// prefix, when set, makes this a folder that was not opened (its
	// entries came from the hash cache): fd is an ancestor's and names
	// are resolved as prefix+name relative to it.
	prefix string
}

// cacheSupported: the hash cache needs ctime and inode numbers.
const cacheSupported = true

// statOf converts a stat buffer into what the hash cache compares.
func statOf(s *unix.Stat_t, st *fileStat) {
	*st = fileStat{size: s.Size, mtime: s.Mtim.Nano(), ctime: s.Ctim.Nano(), ino: uint64(s.Ino), dev: uint64(s.Dev), mode: s.Mode}
}

// statAt stats name in d without following a link. A load with the hash
// cache stats every file of the dataset, so the name is copied into a
// buffer the reader reuses rather than into a C string per call
// (unix.Fstatat), where the architecture's fstatat(2) is known.
func (r *taskReader) statAt(d dirRef, name string, st *fileStat) error {
	var s unix.Stat_t
	if sysFstatat == 0 {
		if err := unix.Fstatat(d.fd, d.prefix+name, &s, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		statOf(&s, st)
		return nil
	}
	if strings.IndexByte(name, 0) >= 0 || strings.IndexByte(d.prefix, 0) >= 0 {
		return unix.EINVAL
	}
	r.nameBuf = append(append(append(r.nameBuf[:0], d.prefix...), name...), 0)
	_, _, errno := syscall.Syscall6(sysFstatat, uintptr(d.fd), uintptr(unsafe.Pointer(&r.nameBuf[0])), uintptr(unsafe.Pointer(&s)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if errno != 0 {
		return errno
	}
	statOf(&s, st)
	return nil
}

// statDir stats an opened folder.
func (r *taskReader) statDir(d dirRef, st *fileStat) error {
	var s unix.Stat_t
	if err := unix.Fstat(d.fd, &s); err != nil {
		return err
	}
	statOf(&s, st)
	return nil
}

// isRegular and isDir read a fileStat's type.
func (st *fileStat) isRegular() bool { return st.mode&unix.S_IFMT == unix.S_IFREG }
func (st *fileStat) isDir() bool     { return st.mode&unix.S_IFMT == unix.S_IFDIR }

func openDir(path string) (dirRef, error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return dirRef{fd: -1}, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return dirRef{fd: fd, path: path}, nil
}

func (r *taskReader) openSubdir(d dirRef, name string) (dirRef, error) {
	fd, err := retryEINTR(func() (int, error) {
		return r.openat(d.fd, d.prefix+name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW)
	})
	if err != nil {
		return dirRef{fd: -1}, &os.PathError{Op: "open", Path: d.path + "/" + name, Err: err}
	}
	return dirRef{fd: fd, path: name}, nil
}

// unopened is the subfolder name of d, reached through d's descriptor
// without opening it.
func (d dirRef) unopened(name string) dirRef {
	return dirRef{fd: d.fd, path: name, prefix: d.prefix + name + "/"}
}

func (d dirRef) close() {
	if d.prefix == "" {
		unix.Close(d.fd)
	}
}

// list reads a folder's entries, unsorted, without "." and "..".
func (r *taskReader) list(d dirRef) ([]dirEntry, error) {
	if r.direntBuf == nil {
		r.direntBuf = make([]byte, 16<<10)
	}
	var out []dirEntry
	for range maxDirentCalls {
		n, err := retryEINTR(func() (int, error) { return unix.Getdents(d.fd, r.direntBuf) })
		if err != nil {
			return nil, &os.PathError{Op: "readdir", Path: d.path, Err: err}
		}
		if n <= 0 {
			return out, nil
		}
		buf := r.direntBuf[:n]
		for len(buf) >= 19 {
			// struct linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }
			reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
			if reclen < 19 || reclen > len(buf) {
				break
			}
			typ := buf[18]
			name := buf[19:reclen]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			buf = buf[reclen:]
			if len(name) == 0 || string(name) == "." || string(name) == ".." {
				continue
			}
			e := dirEntry{name: r.intern(name)}
			switch typ {
			case unix.DT_DIR:
				e.typ = fs.ModeDir
			case unix.DT_REG:
				e.typ = 0
			case unix.DT_LNK:
				e.typ = fs.ModeSymlink
			case unix.DT_UNKNOWN:
				// Some filesystems do not fill d_type: ask.
				var st unix.Stat_t
				if err := unix.Fstatat(d.fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					return nil, &os.PathError{Op: "lstat", Path: d.path + "/" + e.name, Err: err}
				}
				e.typ = modeType(st.Mode)
			default:
				e.typ = modeType(uint32(typ) << 12)
			}
			out = append(out, e)
		}
	}
	return nil, &os.PathError{Op: "readdir", Path: d.path, Err: errTooManyEntries}
}

// modeType maps the S_IFMT bits of a mode to an fs.FileMode type.
func modeType(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFREG:
		return 0
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

// readFileAt hashes the regular file name in d. When keep is set its bytes
// are returned as a fresh slice. st receives the file's stat, taken before
// reading.
func (r *taskReader) readFileAt(d dirRef, name string, keep bool, out *fileStat) (File, []byte, error) {
	p := func() string { return d.path + "/" + name }
	fd, err := retryEINTR(func() (int, error) {
		return r.openat(d.fd, d.prefix+name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK)
	})
	if err != nil {
		return File{}, nil, &os.PathError{Op: "open", Path: p(), Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return File{}, nil, &os.PathError{Op: "stat", Path: p(), Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return File{}, nil, &os.PathError{Op: "open", Path: p(), Err: errNotRegular}
	}
	statOf(&st, out)
	if limit := keptLimit(name); keep && st.Size > limit {
		return File{}, nil, &os.PathError{Op: "read", Path: p(), Err: &tooLargeError{size: st.Size, limit: limit}}
	}
	f := File{Mode: 0o644}
	if st.Mode&0o111 != 0 {
		f.Mode = 0o755
	}
	size := st.Size
	read := func(b []byte) (int, error) {
		total := 0
		for total < len(b) {
			n, err := retryEINTR(func() (int, error) { return unix.Read(fd, b[total:]) })
			if err != nil {
				return total, &os.PathError{Op: "read", Path: p(), Err: err}
			}
			if n == 0 {
				break // the file shrank since fstat
			}
			total += n
		}
		return total, nil
	}
	var sum [sha256.Size]byte
	var data []byte
	switch {
	case keep || size <= int64(len(r.buf)):
		var b []byte
		if keep {
			b = make([]byte, size)
		} else {
			b = r.buf[:size:size]
		}
		n, err := read(b)
		if err != nil {
			return File{}, nil, err
		}
		sum = sha256.Sum256(b[:n])
		f.Size = int64(n)
		if keep {
			data = b[:n]
		}
	default:
		h := sha256.New()
		for remaining := size; remaining > 0; {
			chunk := r.buf[:min(remaining, int64(len(r.buf)))]
			n, err := read(chunk)
			if err != nil {
				return File{}, nil, err
			}
			h.Write(chunk[:n])
			f.Size += int64(n)
			remaining -= int64(n)
			if n < len(chunk) {
				break
			}
		}
		h.Sum(sum[:0])
	}
	f.SHA256 = hex.EncodeToString(sum[:])
	return f, data, nil
}

func readLinkAt(d dirRef, name string) (string, error) {
	buf := make([]byte, 256)
	for range 8 {
		n, err := unix.Readlinkat(d.fd, d.prefix+name, buf)
		if err != nil {
			return "", &os.PathError{Op: "readlink", Path: d.path + "/" + name, Err: err}
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, len(buf)*4)
	}
	return "", &os.PathError{Op: "readlink", Path: d.path + "/" + name, Err: unix.ENAMETOOLONG}
}

// openat is openat(2) with the name copied into a buffer the reader reuses:
// unix.Openat allocates a C string per call, one per file of the dataset.
func (r *taskReader) openat(dirfd int, name string, flags int) (int, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return -1, unix.EINVAL
	}
	r.nameBuf = append(append(r.nameBuf[:0], name...), 0)
	fd, _, errno := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&r.nameBuf[0])), uintptr(flags), 0, 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// retryEINTR repeats a call interrupted by a signal, a bounded number of
// times.
func retryEINTR(call func() (int, error)) (int, error) {
	for range 100 {
		n, err := call()
		if err != unix.EINTR {
			return n, err
		}
	}
	return -1, unix.EINTR
}
