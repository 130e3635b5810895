// Package state is the store: the bbolt state file (attempts, their
// manifests, status transitions and outcomes; apply runs), the
// content-addressed blobs and the per-attempt event logs beside it, and the
// writer lock. It knows nothing of configs or plans beyond the records it
// keeps.
package state
