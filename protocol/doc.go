// Package protocol is the harness protocol: JSON lines over stdio between
// hemra and a program harness (handshake, run.start, events, one result,
// run.cancel), with its limits enforced. The wire format is documented in
// docs/protocol.md.
package protocol
