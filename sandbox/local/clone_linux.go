package local

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// copyContent writes in's bytes to out (a new, empty file) without making
// a sparse file dense: first as a reflink (FICLONE: btrfs, XFS, bcachefs
// share the blocks until either side writes), else extent by extent,
// skipping holes (SEEK_DATA/SEEK_HOLE) and copying data in the kernel
// (copy_file_range). A 3 GiB sparse file with 4 KiB of data copies as
// 4 KiB. A filesystem that knows neither gets a plain copy.
func copyContent(out, in *os.File, size int64) error {
	if err := unix.IoctlFileClone(int(out.Fd()), int(in.Fd())); err == nil {
		return nil
	}
	inFd, outFd := int(in.Fd()), int(out.Fd())
	var pos int64
	for pos < size {
		data, err := unix.Seek(inFd, pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return plainCopy(out, in)
		}
		hole, err := unix.Seek(inFd, data, unix.SEEK_HOLE)
		if err != nil {
			return plainCopy(out, in)
		}
		for off := data; off < hole; {
			src, dst := off, off
			n, err := unix.CopyFileRange(inFd, &src, outFd, &dst, int(min(hole-off, 1<<30)), 0)
			if err != nil || n == 0 {
				if _, err := io.Copy(io.NewOffsetWriter(out, off), io.NewSectionReader(in, off, hole-off)); err != nil {
					return err
				}
				break
			}
			off += int64(n)
		}
		pos = hole
	}
	return out.Truncate(size)
}

// plainCopy copies from the start, for a filesystem without SEEK_DATA.
func plainCopy(out, in *os.File) error {
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := out.Truncate(0); err != nil {
		return err
	}
	if _, err := out.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(out, in)
	return err
}
