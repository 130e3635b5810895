//go:build !unix

package state

import "io/fs"

type fileID struct{}

func diskInfo(fs.FileInfo) (fileID, int64, bool) { return fileID{}, 0, false }
