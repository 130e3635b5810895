//go:build unix

package main

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// mark is the CPU time and clock when apply started its attempts
// (markRusage), for HEMRA_RUSAGE.
var mark struct {
	cpu  int64
	wall int64
}

// markRusage notes the CPU time used so far and the time.
func markRusage() {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		mark.cpu = ru.Utime.Nano() + ru.Stime.Nano()
		mark.wall = time.Now().UnixNano()
	}
}

// writeRusage writes this process's own CPU time and peak resident size
// (getrusage RUSAGE_SELF: without the programs it ran) to path as JSON,
// for make bench (docs/performance.md); with the CPU time and clock of
// markRusage, when apply called it, and the clock now.
func writeRusage(path string) error {
	var self, children syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		return err
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children); err != nil {
		return err
	}
	data, err := json.Marshal(map[string]int64{
		"user_ns":          self.Utime.Nano(),
		"sys_ns":           self.Stime.Nano(),
		"maxrss_kb":        peakRSS(self.Maxrss),
		"children_user_ns": children.Utime.Nano(),
		"children_sys_ns":  children.Stime.Nano(),
		"mark_cpu_ns":      mark.cpu,
		"mark_wall_ns":     mark.wall,
		"end_wall_ns":      time.Now().UnixNano(),
	})
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// peakRSS is the peak resident size in KB of this program's memory
// (VmHWM), where /proc has it: getrusage's counts the memory of the
// process that started hemra too when it was started with vfork.
func peakRSS(fallback int64) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fallback
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			if n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
				return n
			}
		}
	}
	return fallback
}
