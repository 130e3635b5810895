// Package harnesskit is the small Go package for harness authors: it
// speaks hemra's harness protocol (hemra.protocol/1, docs/protocol.md) so
// that a harness is a function:
//
//	func main() {
//		harnesskit.MainWith(harnesskit.Info{Name: "my-agent", Version: "0.1.0"}, run)
//	}
//
//	func run(ctx context.Context, r *harnesskit.Run) (*harnesskit.Result, error) {
//		r.Message("user", r.Instruction())
//		// ... work in r.Workdir(), keep files in r.ArtifactsDir() ...
//		return &harnesskit.Result{Output: "done"}, nil
//	}
//
// Main sends the hello, reads run.start, cancels ctx on run.cancel (or
// SIGTERM), and writes the result: a returned error or a panic becomes a
// result with status "error". It depends only on the standard library and
// the protocol's message types, so a harness builds with CGO_ENABLED=0
// into one static binary. examples/harness-go is a complete harness.
package harnesskit
