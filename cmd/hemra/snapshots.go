package main

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/hemra-dev/hemra/sandbox/docker"
)

// snapshotChecker is planner.Options.SnapshotExists for this machine: a
// docker snapshot (an image ID) is looked up in the engine, once each. It
// answers true for anything it cannot check (another provider's
// reference, or no engine answering), so an unreachable engine never
// turns re-verifies into re-runs: the state's record stands.
func snapshotChecker(g *Globals) func(string) bool {
	var (
		once   sync.Once
		p      *docker.Provider
		mu     sync.Mutex
		answer = map[string]bool{}
	)
	return func(ref string) bool {
		if !strings.HasPrefix(ref, "sha256:") {
			return true
		}
		once.Do(func() {
			prov, err := docker.New(docker.Options{Environ: g.Environ})
			if err != nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if ok, _ := prov.Available(ctx); ok {
				p = prov
			}
		})
		if p == nil {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		if known, ok := answer[ref]; ok {
			return known
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		answer[ref] = p.SnapshotExists(ctx, ref)
		return answer[ref]
	}
}
