package executor

import (
	"os"
	"path/filepath"

	"github.com/hemra-dev/hemra/sandbox/local"
	"github.com/hemra-dev/hemra/state"
)

// trimWorkspace runs once an attempt's outcome is durable. It removes from
// the attempt's work folder what the store or the task already holds, so
// work folders do not grow by a copy of every task per attempt:
//
//   - each artifact stored as a blob (its copy in artifacts/, or in
//     collected/artifacts/ when copied out of a container);
//   - tests/, the copy of the task's tests the verifier ran (the task
//     folder has them, the manifest their hashes);
//   - app/ on the local sandbox, when the agent's working directory is
//     kept in a snapshot (snapshot/app, here or in the attempt whose agent
//     this one reused): a re-verify restores from there.
//
// What is kept: the snapshot, the agent's and the verifier's logs (the
// store has no other copy), and anything of an attempt whose artifacts
// were not stored. Failing to remove is harmless and silent: the folder
// stays as it was.
func (a *attemptRun) trimWorkspace(out *state.Outcome) {
	if a.ws == "" {
		return
	}
	root, err := os.OpenRoot(a.ws)
	if err != nil {
		return
	}
	defer root.Close()
	for _, dir := range []string{local.ArtifactsDir, filepath.Join("collected", "artifacts")} {
		for _, art := range out.Artifacts {
			if filepath.IsLocal(art.Path) {
				_ = root.Remove(filepath.Join(dir, filepath.FromSlash(art.Path)))
			}
		}
		removeEmptyDirs(root, dir)
	}
	_ = root.RemoveAll(local.TestsDir)
	if a.j.settings.Kind == "local" && out.Snapshot != "" {
		if _, err := os.Stat(filepath.Join(out.Snapshot, local.AppDir)); err == nil {
			_ = root.RemoveAll(local.AppDir)
		}
	}
}

// removeEmptyDirs removes dir and the folders under it that hold nothing,
// deepest first; a folder with a file left in it stays.
func removeEmptyDirs(root *os.Root, dir string) {
	entries, err := fsReadDir(root, dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			removeEmptyDirs(root, filepath.Join(dir, e.Name()))
		}
	}
	_ = root.Remove(dir) // fails, as it should, when not empty
}

func fsReadDir(root *os.Root, dir string) ([]os.DirEntry, error) {
	f, err := root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}
