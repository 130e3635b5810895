//go:build unix && !linux

package mcprelay

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// Without waitid(WNOWAIT) the group is killed right after the leader is
// reaped (a pgid reused in that instant would be hit: accepted here).
const canWaitNoReap = false

func waitExitedNoReap(int) {}
