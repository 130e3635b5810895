package state

import (
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// dropPages tells the kernel this process no longer needs the pages of
// state.db it has read through bbolt's memory map (MADV_DONTNEED on the
// map): they leave its resident set and stay in the page cache, so a later
// read faults them back in cheaply. What a reader keeps from the map stays
// valid. Readers that walk a whole bucket call it as they go, so that
// reading a state of a million attempts does not make hemra as big as its
// file.
func dropPages(tx *bolt.Tx) {
	info := tx.DB().Info()
	if info == nil || info.Data == 0 {
		return
	}
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, info.Data, uintptr(tx.Size()), syscall.MADV_DONTNEED)
}
