package planner_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hemra-dev/hemra/planner"
	"github.com/hemra-dev/hemra/state"
)

// A judge that reads the agent's files can only be re-run on the agent's
// snapshot: with it gone, editing the rubric re-runs the attempt; with it
// kept, it is a re-judge. A judge that reads no file re-judges either way.
// After a judge's infrastructure error, the retry runs the judges only.
func TestRejudgeNeedsTheSnapshotOnlyWhenItReadsFiles(t *testing.T) {
	for _, tc := range []struct {
		name, judgeTOML string
		want            planner.Action
	}{
		{"reads files", "[judge]\nfiles = [\"/app/out.txt\"]\n[[criterion]]\ndescription = \"Is out.txt right?\"\n", planner.ActionRerun},
		{"reads no file", "[judge]\nlast_message = true\n[[criterion]]\ndescription = \"Is the answer right?\"\n", planner.ActionRejudge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			before, after := filepath.Join(tmp, "before"), filepath.Join(tmp, "after")
			copyDir(t, "testdata/_base", before)
			copyDir(t, "testdata/_base", after)
			writeFile(t, filepath.Join(before, "judges/quality/judge.toml"), []byte(tc.judgeTOML))
			writeFile(t, filepath.Join(after, "judges/quality/judge.toml"), []byte(tc.judgeTOML))
			writeFile(t, filepath.Join(after, "judges/quality/rubric.md"), []byte("Stricter.\n"))
			cfg := load(t, before)
			p, diags := planner.Compute(cfg, planner.EmptyPrior(), imageOpts(t, cfg, before, planner.Options{}))
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			prior := applyAsFinished(t, cfg, p)
			for addr, c := range prior.Currents {
				prior.Attempts[c.AttemptID].Outcome.Snapshot = "snap-" + c.AttemptID
				c.SnapshotKept = true
				prior.Currents[addr] = c
			}
			cfg = load(t, after)
			plan, diags := planner.Compute(cfg, prior, imageOpts(t, cfg, after, planner.Options{
				SnapshotExists: func(string) bool { return false },
			}))
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			judged := 0
			for _, pa := range plan.Attempts {
				if !strings.HasPrefix(pa.Address, "baseline/") {
					continue
				}
				judged++
				if pa.Action != tc.want {
					t.Errorf("%s: %s %v, want %s", pa.Address, pa.Action, pa.Reasons, tc.want)
				}
			}
			if judged == 0 {
				t.Fatal("no judged attempt in the base case")
			}
		})
	}

	// A judge's infrastructure error: the retry is judges-only.
	tmp := t.TempDir()
	copyDir(t, "testdata/_base", tmp)
	cfg := load(t, tmp)
	p, diags := planner.Compute(cfg, planner.EmptyPrior(), imageOpts(t, cfg, tmp, planner.Options{}))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	prior := applyAsFinished(t, cfg, p)
	var addr string
	for a, c := range prior.Currents {
		if strings.HasPrefix(a, "baseline/") && addr == "" {
			addr = a
			c.Class, c.Status, c.JudgeRetry = state.ClassInfraError, state.StatusErrored, true
			prior.Currents[a] = c
		}
	}
	plan, diags := planner.Compute(cfg, prior, imageOpts(t, cfg, tmp, planner.Options{}))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, pa := range plan.Attempts {
		if pa.Address == addr && (pa.Action != planner.ActionRetry || !pa.RetryJudges || !pa.JudgesOnly() || pa.Manifest.ReusedAgentFrom == "") {
			t.Errorf("%s: %s judges-only %v reused %q", addr, pa.Action, pa.RetryJudges, pa.Manifest.ReusedAgentFrom)
		}
	}
}
