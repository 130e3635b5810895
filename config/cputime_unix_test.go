//go:build unix

package config

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used: a
// figure a loaded machine inflates far less than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
