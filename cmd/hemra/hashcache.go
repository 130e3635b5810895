package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hemra-dev/hemra/dataset"
)

// hashCachePath is where the store keeps the file hash cache: task files'
// SHA-256 by path and stat, so a plan reads only the files that changed.
// Deleting it is always safe.
func hashCachePath(g *Globals) string {
	return filepath.Join(g.StorePath(), "cache", "filehash.v1")
}

// openHashCache opens the store's file hash cache (empty when there is
// none or it is unreadable), or returns nil when there is no store: the
// cache would not be saved (saveHashCache), so it is not built either.
func openHashCache(g *Globals) *dataset.HashCache {
	if fi, err := os.Stat(g.StorePath()); err != nil || !fi.IsDir() {
		return nil
	}
	return dataset.OpenHashCache(hashCachePath(g))
}

// saveHashCache writes the cache back when it changed. A command that only
// reads never creates the store for it: without a store there is no
// cache. Failing to write it is a warning; nothing depends on it.
func saveHashCache(g *Globals, hc *dataset.HashCache) {
	if hc == nil {
		return
	}
	if fi, err := os.Stat(g.StorePath()); err != nil || !fi.IsDir() {
		return
	}
	if err := hc.Save(); err != nil {
		fmt.Fprintf(g.Stderr, "Warning: %v; the next plan reads every task file again.\n", err)
	}
}
