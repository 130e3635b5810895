package local

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ensureDir makes name a folder inside root, replacing whatever non-folder
// is there (a symlink the agent left, say).
func ensureDir(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		if err := root.RemoveAll(name); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return root.MkdirAll(name, 0o755)
}

// copyTree copies srcName (a file or folder inside src) to dstName inside
// dst. Both sides go through an os.Root, so neither reading nor writing
// can leave its tree. Regular files keep their executable bit; folders are
// created; symlinks are recreated as symlinks when keepLinks (never
// followed) and skipped otherwise; special files are skipped.
func copyTree(ctx context.Context, src *os.Root, srcName string, dst *os.Root, dstName string, keepLinks bool) error {
	srcName = filepath.ToSlash(filepath.Clean(srcName))
	dstName = filepath.Clean(dstName)
	fi, err := src.Lstat(srcName)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return copyEntry(src, srcName, fi.Mode(), dst, dstName, keepLinks)
	}
	return fs.WalkDir(src.FS(), srcName, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel := "."
		if p != srcName {
			rel = p[len(srcName)+1:]
			if srcName == "." {
				rel = p
			}
		}
		target := filepath.Join(dstName, filepath.FromSlash(rel))
		if d.IsDir() {
			return ensureDir(dst, target)
		}
		return copyEntry(src, p, d.Type(), dst, target, keepLinks)
	})
}

func copyEntry(src *os.Root, name string, mode fs.FileMode, dst *os.Root, target string, keepLinks bool) error {
	switch {
	case mode.IsRegular():
		return copyFile(src, name, dst, target)
	case mode&fs.ModeSymlink != 0:
		if !keepLinks {
			return nil
		}
		link, err := src.Readlink(name)
		if err != nil {
			return err
		}
		if err := removeNonDir(dst, target); err != nil {
			return err
		}
		return dst.Symlink(link, target)
	}
	return nil // sockets, pipes, devices: never copied
}

func copyFile(src *os.Root, name string, dst *os.Root, target string) error {
	in, err := src.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil // became a symlink since the walk: not followed
		}
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	perm := fs.FileMode(0o644)
	if fi.Mode().Perm()&0o111 != 0 {
		perm = 0o755
	}
	if err := removeNonDir(dst, target); err != nil {
		return err
	}
	if dir := filepath.Dir(target); dir != "." {
		if err := dst.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	out, err := dst.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return err
	}
	if fi.Size() <= smallCopy {
		err = copySmall(out, in, fi.Size())
	} else {
		err = copyContent(out, in, fi.Size())
	}
	if err == nil {
		// On the open file: the mode O_CREAT gave it less the umask, or
		// the one a file it truncated had.
		err = out.Chmod(perm)
	}
	if err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// smallCopy is the size up to which a file is copied by one read and one
// write: a task's scripts and a verifier's reward files, which
// copyContent would spend six system calls on (a reflink tried, a
// hole looked for, a kernel copy, a truncate). A hole in a file this
// small saves at most a few blocks.
const smallCopy = 16 << 10

// copySmall copies size bytes of a small file (its size at its Stat, as
// copyContent does: a file that grew since is cut there, one that shrank
// is made that long again) by one read and one write.
func copySmall(out, in *os.File, size int64) error {
	if size == 0 {
		return nil
	}
	buf := make([]byte, size)
	n, err := io.ReadFull(in, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return err
	}
	if _, err := out.Write(buf[:n]); err != nil {
		return err
	}
	if int64(n) < size {
		return out.Truncate(size)
	}
	return nil
}

// removeNonDir clears target when it is a symlink or special file, so a
// write never lands where a link points.
func removeNonDir(dst *os.Root, target string) error {
	fi, err := dst.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().IsRegular() {
		return nil
	}
	return dst.RemoveAll(target)
}
