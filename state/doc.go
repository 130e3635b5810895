// Package state is the store: the bbolt state file (attempts, their
// manifests, status transitions and outcomes; apply runs), the
// content-addressed blobs and the per-attempt event logs beside it, and the
// writer lock. It knows nothing of configs or plans beyond the records it
// keeps, and never prints.
//
// One process writes (Open with Options.Writer takes writer.lock for the
// store's lifetime); any number read, also while a writer works: the writer
// opens state.db only around each batch of writes, and readers open it
// read-only for one transaction at a time (see docs/state.md for the design
// and its cost). schema.go names every bucket and key; statetest is the
// conformance suite.
package state
