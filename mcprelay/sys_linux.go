package mcprelay

import (
	"syscall"
	"unsafe"
)

// sysProcAttr puts a server in its own process group and has the kernel
// SIGKILL it if hemra dies without stopping it (a crash, a SIGKILL).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitExitedNoReap blocks until the child pid has exited, leaving it a
// zombie (WNOWAIT) so its pid and process group id stay reserved until
// exec.Cmd.Wait reaps it.
const canWaitNoReap = true

func waitExitedNoReap(pid int) {
	const pPID = 1
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}
