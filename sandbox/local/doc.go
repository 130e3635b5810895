// Package local is the local sandbox provider: each command a child process
// in its own process group, with a cleared environment (PATH plus named
// variables) and its working directory in the attempt's workspace. It
// offers no isolation capability and says so.
package local
