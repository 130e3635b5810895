//go:build !linux

package state

// syncAll makes files and the renames in dirs durable: an fsync each.
func syncAll(_ string, files []string, dirs map[string]struct{}) error {
	return syncEach(files, dirs)
}
