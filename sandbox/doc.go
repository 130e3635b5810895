// Package sandbox defines the provider interface every sandbox kind
// implements (start, exec, upload/download, snapshot, stop, capabilities)
// and the capability names. Providers live in subpackages: local and docker.
package sandbox
