//go:build linux && !amd64 && !arm64

package dataset

// sysFstatat is 0 where fstatat(2) is not called directly: statAt goes
// through unix.Fstatat (architectures with fstatat64 or statx only).
const sysFstatat = 0
