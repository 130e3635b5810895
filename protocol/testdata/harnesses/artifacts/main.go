// artifacts leaves artifacts chosen by its args: a symlink to
// /etc/passwd beside a real file ({"mode":"symlink"}), or a 2 MiB file
// ({"mode":"big"}).
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hemra-dev/hemra/harnesskit"
)

func main() {
	harnesskit.Main(func(ctx context.Context, r *harnesskit.Run) (*harnesskit.Result, error) {
		var args struct{ Mode string }
		if err := r.Args(&args); err != nil {
			return nil, err
		}
		dir := r.ArtifactsDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("real notes\n"), 0o644); err != nil {
			return nil, err
		}
		switch args.Mode {
		case "symlink":
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
				return nil, err
			}
		case "big":
			if err := os.WriteFile(filepath.Join(dir, "big.bin"), bytes.Repeat([]byte("x"), 2<<20), 0o644); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("unknown mode %q", args.Mode)
		}
		return &harnesskit.Result{Output: args.Mode}, nil
	})
}
