package gitinfo

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path"
	"strings"
	"time"
)

// Info is where a folder is in its git work tree.
type Info struct {
	// Prefix is the folder relative to the work tree's root, with
	// slashes: "evals/baseline", or "." at the root.
	Prefix string
	// Commit is HEAD's full hash; "" before the first commit.
	Commit string
}

// ErrNotWorkTree is returned for a folder outside any git work tree, or
// where git cannot be run.
var ErrNotWorkTree = errors.New("not in a git work tree")

// timeout bounds the git calls: a plan never waits on a repository.
const timeout = 5 * time.Second

// Lookup reports where dir is in its git work tree. environ is the
// environment git runs with (nil: hemra's own).
func Lookup(dir string, environ []string) (Info, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := run(ctx, dir, environ, "rev-parse", "--is-inside-work-tree", "--show-prefix")
	if err != nil {
		return Info{}, ErrNotWorkTree
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 1 || lines[0] != "true" {
		return Info{}, ErrNotWorkTree
	}
	info := Info{Prefix: "."}
	if len(lines) > 1 && lines[1] != "" {
		info.Prefix = path.Clean(lines[1])
	}
	// HEAD does not resolve before the first commit: no commit, not an
	// error.
	if out, err := run(ctx, dir, environ, "rev-parse", "--verify", "--quiet", "HEAD"); err == nil {
		info.Commit = strings.TrimSpace(out)
	}
	return info, nil
}

func run(ctx context.Context, dir string, environ []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	if environ != nil {
		cmd.Env = append(append([]string(nil), environ...), "GIT_OPTIONAL_LOCKS=0")
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Run(); err != nil {
		return "", err
	}
	return stdout.String(), nil
}
