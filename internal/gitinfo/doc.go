// Package gitinfo tells where a folder sits in a git work tree: its path
// from the work tree's root and the HEAD commit. hemra writes both in the
// header of a plan posted to a pull request, so that a stale plan comment
// can be told from a fresh one.
//
// It asks the git program (`git rev-parse`), which knows every layout a
// repository can have (worktrees, submodules, packed and reftable refs);
// without git, or outside a work tree, it says so and hemra plans all the
// same.
package gitinfo
