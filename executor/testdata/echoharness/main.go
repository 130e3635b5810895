// Command echoharness is the smallest useful harness, for benchmarks: it
// answers each task with its input, at once.
package main

import (
	"context"
	"encoding/json"

	"github.com/hemra-dev/hemra/harnesskit"
)

func main() {
	harnesskit.MainWith(harnesskit.Info{Name: "echo", Version: "1"}, func(_ context.Context, r *harnesskit.Run) (*harnesskit.Result, error) {
		return &harnesskit.Result{Output: json.RawMessage(r.Input())}, nil
	})
}
