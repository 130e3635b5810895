// Package docker is the Docker sandbox provider, on the real Docker Engine
// through github.com/docker/docker/client: hardened containers run by
// digest, task images built from environment/Dockerfile, verifier
// snapshots by commit, labels on everything it creates, and pruning.
package docker
