// Package local is the local sandbox provider: each command a child process
// in its own process group, with a cleared environment (PATH, the spec's
// and the request's variables, and the HEMRA_* folder variables) and its
// working directory in the attempt's workspace (app/). It offers no
// isolation capability and says so; Validate refuses every setting it
// cannot enforce.
//
// Start creates the workspace folders of the local-sandbox folder contract
// (app/, logs/agent/, logs/verifier/, artifacts/; tests/ and solution/
// when something is uploaded there) and restores a snapshot when asked.
// Wait kills whatever the command left in its process group. Every file
// access inside the workspace goes through an os.Root, so a symlink the
// agent left cannot make hemra read or write outside it. Stop kills running
// commands and removes nothing. docs/local-sandbox.md is the user's guide.
package local
