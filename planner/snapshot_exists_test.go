package planner_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hemra-dev/hemra/planner"
)

// A snapshot removed outside hemra (docker image rm, a prune) turns the
// re-verify its attempt would get into a re-run; the others re-verify.
func TestSnapshotGoneFromTheSandboxUpgradesReverify(t *testing.T) {
	tmp := t.TempDir()
	before, after := filepath.Join(tmp, "before"), filepath.Join(tmp, "after")
	copyDir(t, "testdata/_base", before)
	copyDir(t, "testdata/_base", after)
	writeFile(t, filepath.Join(after, "tasks/sum/tests/test.sh"), []byte("#!/bin/sh\necho 0 > \"${HEMRA_VERIFIER_LOGS:-/logs/verifier}/reward.txt\"\n"))

	cfg := load(t, before)
	p, diags := planner.Compute(cfg, planner.EmptyPrior(), imageOpts(t, cfg, before, planner.Options{}))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	prior := applyAsFinished(t, cfg, p)
	var gone string
	for addr, c := range prior.Currents {
		if filepath.Base(addr) == "sum#1" && gone == "" {
			gone = addr
		}
		prior.Attempts[c.AttemptID].Outcome.Snapshot = "snap-" + c.AttemptID
	}
	if gone == "" {
		t.Fatal("no attempt of task sum in the base case")
	}
	missing := "snap-" + prior.Currents[gone].AttemptID
	var asked atomic.Int32
	cfg = load(t, after)
	plan, diags := planner.Compute(cfg, prior, imageOpts(t, cfg, after, planner.Options{
		SnapshotExists: func(ref string) bool { asked.Add(1); return ref != missing },
	}))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	reverified := 0
	for _, pa := range plan.Attempts {
		switch {
		case pa.Address == gone && pa.Action != planner.ActionRerun:
			t.Errorf("%s: %s, want a re-run (its snapshot is gone)", pa.Address, pa.Action)
		case pa.Action == planner.ActionReverify:
			reverified++
		}
	}
	if reverified == 0 || asked.Load() == 0 {
		t.Errorf("%d re-verified, %d snapshots asked about; want the others re-verified after asking", reverified, asked.Load())
	}
}
