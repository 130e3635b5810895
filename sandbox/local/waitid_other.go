//go:build unix && !linux

package local

// waitExitedNoReap is a no-op where waitid(WNOWAIT) is not used: Wait
// reaps first and then kills the group, which leaves a tiny window for
// pgid reuse.
func waitExitedNoReap(pid int) {}

// onlyZombiesLeft cannot tell without /proc; Wait keeps killing until its
// bound.
func onlyZombiesLeft(pgid int) bool { return false }
