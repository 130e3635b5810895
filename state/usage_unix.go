//go:build unix

package state

import (
	"io/fs"
	"syscall"
)

type fileID struct{ dev, ino uint64 }

// diskInfo is a file's identity and the bytes it occupies on disk.
func diskInfo(info fs.FileInfo) (fileID, int64, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, 0, false
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, int64(st.Blocks) * 512, true
}
