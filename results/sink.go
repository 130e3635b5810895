package results

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// sink is where an export goes: a folder or a .tar.gz, written file by
// file (each file's size known before it is written, as tar needs) so
// that an export streams whatever its size. Every file's SHA-256 is
// recorded as it is written, for SHA256SUMS.
type sink interface {
	// put writes one file at rel (slash-separated) of size bytes.
	put(rel string, size int64, r io.Reader) error
	close() error
	abort()
}

// checksums spools "sha256  path" lines to a temporary file, so that the
// list of an export of any size costs no memory.
type checksums struct {
	f *os.File
	w *bufio.Writer
}

func newChecksums() (*checksums, error) {
	f, err := os.CreateTemp("", "hemra-export-sums-*")
	if err != nil {
		return nil, err
	}
	_ = os.Remove(f.Name())
	return &checksums{f: f, w: bufio.NewWriter(f)}, nil
}

func (c *checksums) add(rel string, sum []byte) {
	fmt.Fprintf(c.w, "%s  %s\n", hex.EncodeToString(sum), rel)
}

// reader is the list so far, from its start.
func (c *checksums) reader() (io.Reader, int64, error) {
	if err := c.w.Flush(); err != nil {
		return nil, 0, err
	}
	size, err := c.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, 0, err
	}
	return io.NewSectionReader(c.f, 0, size), size, nil
}

func (c *checksums) close() { c.f.Close() }

// safeRel refuses a path that would leave the export.
func safeRel(rel string) error {
	if rel == "" || path.IsAbs(rel) || strings.Contains(rel, "\\") || path.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("export path %q is not a plain relative path", rel)
	}
	return nil
}

// folderSink writes into a new folder.
type folderSink struct {
	dir  string
	sums *checksums
}

func newFolderSink(dir string, sums *checksums) (*folderSink, error) {
	if _, err := os.Lstat(dir); err == nil {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		if len(entries) > 0 {
			return nil, fmt.Errorf("%s exists and is not empty: give a new folder, or a .tar.gz", dir)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &folderSink{dir: dir, sums: sums}, nil
}

func (s *folderSink) put(rel string, size int64, r io.Reader) error {
	if err := safeRel(rel); err != nil {
		return err
	}
	p := filepath.Join(s.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = fmt.Errorf("%s: wrote %d bytes, expected %d (the source changed while exporting)", rel, n, size)
	}
	if err != nil {
		return err
	}
	s.sums.add(rel, h.Sum(nil))
	return nil
}

func (s *folderSink) close() error { return nil }
func (s *folderSink) abort()       { _ = os.RemoveAll(s.dir) }

// tarSink writes a .tar.gz: every file under one top folder, named like
// the archive, so that extracting it makes one folder.
type tarSink struct {
	path string
	root string
	f    *os.File
	gz   *gzip.Writer
	tw   *tar.Writer
	sums *checksums
	dirs map[string]bool
	at   time.Time
}

func newTarSink(file string, sums *checksums, at time.Time) (*tarSink, error) {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%s exists: hemra export never overwrites a file", file)
		}
		return nil, err
	}
	root := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(file), ".tar.gz"), ".tgz")
	gz := gzip.NewWriter(f)
	return &tarSink{path: file, root: root, f: f, gz: gz, tw: tar.NewWriter(gz), sums: sums, dirs: map[string]bool{}, at: at}, nil
}

func (s *tarSink) mkdirs(rel string) error {
	dir := path.Dir(rel)
	if dir == "." || s.dirs[dir] {
		return nil
	}
	if err := s.mkdirs(dir); err != nil {
		return err
	}
	s.dirs[dir] = true
	return s.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: s.root + "/" + dir + "/", Mode: 0o700, ModTime: s.at})
}

func (s *tarSink) put(rel string, size int64, r io.Reader) error {
	if err := safeRel(rel); err != nil {
		return err
	}
	if err := s.mkdirs(rel); err != nil {
		return err
	}
	if err := s.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: s.root + "/" + rel, Size: size, Mode: 0o600, ModTime: s.at}); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(s.tw, h), io.LimitReader(r, size))
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("%s: wrote %d bytes, expected %d (the source changed while exporting)", rel, n, size)
	}
	s.sums.add(rel, h.Sum(nil))
	return nil
}

func (s *tarSink) close() error {
	err := s.tw.Close()
	if e := s.gz.Close(); err == nil {
		err = e
	}
	if e := s.f.Sync(); err == nil {
		err = e
	}
	if e := s.f.Close(); err == nil {
		err = e
	}
	return err
}

func (s *tarSink) abort() {
	s.f.Close()
	_ = os.Remove(s.path)
}

// putBytes writes a small file held in memory.
func putBytes(s sink, rel string, b []byte) error {
	return s.put(rel, int64(len(b)), strings.NewReader(string(b)))
}

// putFile copies a file of the store, refusing a symbolic link.
func putFile(s sink, rel, src string) error {
	f, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	return s.put(rel, st.Size(), f)
}
