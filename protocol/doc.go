// Package protocol is the harness protocol, version "hemra.protocol/1":
// JSON lines over stdio between hemra and a program harness (hello,
// run.start, events, one result, run.cancel), with its limits enforced.
// The wire format is documented in docs/protocol.md; the message types
// live in protocol/wire so harness binaries can share them cheaply.
//
// It owns one session with one harness process (Run, or Exec to start the
// process too): the handshake and deadline timers, the 1 MiB line and
// 64 MiB event limits, the event log lines, the stderr tail, and the
// cancel escalation (run.cancel, SIGTERM, SIGKILL to the process group).
// It also owns the artifact rules (CollectArtifacts): regular files only,
// no symlink escapes, quotas, SHA-256 computed by hemra.
//
// It does not own where the harness runs (a sandbox.Provider), what an
// outcome means for the attempt (the executor classifies and records it),
// nor the store (StoreArtifacts takes the store's put function).
package protocol
