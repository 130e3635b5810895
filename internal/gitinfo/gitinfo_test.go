package gitinfo_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hemra-dev/hemra/internal/gitinfo"
)

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func TestLookupInAWorkTree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	repo := t.TempDir()
	evalDir := filepath.Join(repo, "evals", "baseline")
	if err := os.MkdirAll(evalDir, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "init", "-q")
	// Before the first commit: a prefix, no commit.
	info, err := gitinfo.Lookup(evalDir, nil)
	if err != nil || info.Prefix != "evals/baseline" || info.Commit != "" {
		t.Fatalf("before the first commit: %+v, %v", info, err)
	}
	os.WriteFile(filepath.Join(evalDir, "main.hcl"), []byte("\n"), 0o644)
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "first")
	info, err = gitinfo.Lookup(evalDir, nil)
	if err != nil || info.Prefix != "evals/baseline" || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(info.Commit) {
		t.Fatalf("after a commit: %+v, %v", info, err)
	}
	if root, err := gitinfo.Lookup(repo, nil); err != nil || root.Prefix != "." || root.Commit != info.Commit {
		t.Fatalf("at the root: %+v, %v", root, err)
	}
}

func TestLookupOutsideAWorkTree(t *testing.T) {
	dir := t.TempDir()
	// A folder under the system temp folder is in no work tree unless
	// the temp folder itself is: then there is nothing to test.
	if _, err := gitinfo.Lookup(dir, nil); !errors.Is(err, gitinfo.ErrNotWorkTree) {
		if _, lookErr := exec.LookPath("git"); lookErr == nil {
			t.Skipf("the temp folder is inside a git work tree (%v)", err)
		}
	}
	// A folder that does not exist is never one.
	if _, err := gitinfo.Lookup(filepath.Join(dir, "missing"), nil); !errors.Is(err, gitinfo.ErrNotWorkTree) {
		t.Fatalf("a missing folder: %v", err)
	}
}
