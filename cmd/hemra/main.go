// Command hemra plans and applies evaluations of AI agents declared in HCL.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

func main() {
	stop := profile(os.Getenv("HEMRA_CPUPROFILE"), os.Getenv("HEMRA_MEMPROFILE"))
	code := Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())
	stop()
	if path := os.Getenv("HEMRA_RUSAGE"); path != "" {
		if err := writeRusage(path); err != nil {
			fmt.Fprintf(os.Stderr, "hemra: HEMRA_RUSAGE: %v\n", err)
		}
	}
	os.Exit(code)
}

// profile starts a CPU profile into cpuPath and, when stopped, writes a
// heap profile (allocations since the start) into memPath; either may be
// empty. For measuring hemra itself (docs/performance.md); a profile that
// cannot be written is reported and does not change the exit code.
func profile(cpuPath, memPath string) (stop func()) {
	var cpu *os.File
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "hemra: HEMRA_CPUPROFILE: %v\n", err)
		} else {
			cpu = f
		}
	}
	return func() {
		if cpu != nil {
			pprof.StopCPUProfile()
			cpu.Close()
		}
		if memPath == "" {
			return
		}
		f, err := os.Create(memPath)
		if err == nil {
			runtime.GC()
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "hemra: HEMRA_MEMPROFILE: %v\n", err)
		}
	}
}
