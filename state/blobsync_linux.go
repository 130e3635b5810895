package state

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// syncAll makes files and the renames in dirs durable with one syncfs(2)
// of the file system that holds the store.
func syncAll(dir string, files []string, dirs map[string]struct{}) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		if errors.Is(err, unix.ENOSYS) {
			return syncEach(files, dirs)
		}
		return &os.SyscallError{Syscall: "syncfs", Err: err}
	}
	return nil
}
