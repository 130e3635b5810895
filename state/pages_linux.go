package state

import (
	"bytes"
	"os"
	"strconv"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// dropPages tells the kernel this process no longer needs the pages of
// state.db it has read through bbolt's memory map (MADV_DONTNEED on the
// map): they leave its resident set and stay in the page cache, so a later
// read faults them back in cheaply. What a reader keeps from the map stays
// valid. Readers that walk a whole bucket call it as they go (see
// View.walked), so that reading a state of a million attempts does not
// make hemra as big as its file.
func dropPages(tx *bolt.Tx) {
	info := tx.DB().Info()
	if info == nil || info.Data == 0 {
		return
	}
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, info.Data, uintptr(tx.Size()), syscall.MADV_DONTNEED)
}

// fileResident is how many bytes of files this process has mapped in
// memory (the shared field of /proc/self/statm: state.db's map and
// hemra's own code), -1 when it cannot tell. The kernel maps a file's
// pages 16 at a time around each one touched, so the pages a walk leaves
// resident are best counted, not guessed from the records read.
func fileResident() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := bytes.Fields(data)
	if len(f) < 3 {
		return -1
	}
	pages, err := strconv.ParseInt(string(f[2]), 10, 64)
	if err != nil {
		return -1
	}
	return pages * int64(os.Getpagesize())
}
