//go:build !unix

package main

// stdoutClosed: without poll, a SIGPIPE is taken as stdout's.
func stdoutClosed() bool { return true }
