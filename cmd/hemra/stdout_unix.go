//go:build unix

package main

import "golang.org/x/sys/unix"

// stdoutClosed reports whether the reader of hemra's stdout went away.
// Once hemra asks for SIGPIPE (see stopper), the signal comes for a write
// to any broken pipe or socket (an API server or engine closing a stream
// hemra was writing to), not only stdout's: a pipe whose reader is gone
// polls POLLERR, a working stdout does not.
func stdoutClosed() bool {
	fds := []unix.PollFd{{Fd: 1, Events: unix.POLLOUT}}
	if _, err := unix.Poll(fds, 0); err != nil {
		return false
	}
	return fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
}
