package harnesskit_test

import (
	"context"
	"os"
	"strings"

	"github.com/hemra-dev/hemra/harnesskit"
)

// Serve runs a harness on any reader and writer; Main does the same on
// stdin and stdout. Here hemra's side is a fixed run.start line.
func ExampleServe() {
	in := strings.NewReader(`{"type":"run.start","protocol":"hemra.protocol/1","task":{"id":"t1","instruction":"Say hi."},"args":{"name":"Ada"}}` + "\n")
	harnesskit.Serve(context.Background(), in, os.Stdout, harnesskit.Info{Name: "greeter", Version: "1.0.0"},
		func(ctx context.Context, r *harnesskit.Run) (*harnesskit.Result, error) {
			var args struct{ Name string }
			if err := r.Args(&args); err != nil {
				return nil, err
			}
			r.Message("assistant", "Hi, "+args.Name+"!")
			return &harnesskit.Result{Output: "Hi, " + args.Name + "!"}, nil
		})
	// Output:
	// {"type":"hello","protocol":"hemra.protocol/1","harness":{"name":"greeter","version":"1.0.0"}}
	// {"type":"event","kind":"message","data":{"role":"assistant","content":"Hi, Ada!"}}
	// {"type":"result","status":"ok","output":"Hi, Ada!"}
}
