package dataset

import "golang.org/x/sys/unix"

// sysFstatat is fstatat(2) for this architecture (see statAt).
const sysFstatat = unix.SYS_FSTATAT
