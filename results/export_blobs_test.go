package results

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"sort"
	"testing"

	"github.com/hemra-dev/hemra/state"
)

// TestBlobsOfNamesEveryBlob lists a record naming a blob in every place a
// record can: blobsOf (what an export copies) names each.
func TestBlobsOfNamesEveryBlob(t *testing.T) {
	n := 0
	sha := func() string {
		n++
		s := sha256.Sum256([]byte{byte(n)})
		return hex.EncodeToString(s[:])
	}
	var want []string
	named := func() string {
		s := sha()
		want = append(want, s)
		return s
	}
	exit := 0
	a := &state.Attempt{
		Manifest: state.Manifest{Inputs: []state.Input{{Stage: "agent", Path: "task.instruction.md", Value: "x", Blob: named()}}},
		Outcome: &state.Outcome{
			Artifacts: []state.Artifact{{Path: "out.txt", SHA256: named()}},
			Logs:      []state.Artifact{{Path: "agent/oracle.txt", SHA256: named()}, {Path: "steps/b/verifier/ctrf.json", SHA256: named()}},
			Commands: []state.CommandOutput{
				{Stage: "agent", Name: "solution/solve.sh", Exit: &exit, Stdout: &state.Output{SHA256: named()}, Stderr: &state.Output{SHA256: named()}},
				{Stage: "verify", Step: "b", Name: "steps/b/tests/test.sh", Stdout: &state.Output{SHA256: named()}},
				{Stage: "agent", Name: "healthcheck"},
			},
			Steps:         []state.StepOutcome{{Name: "a"}, {Name: "b"}},
			Judges:        map[string]state.JudgeScore{"q": {Calls: []state.ModelCall{{Seq: 1, RequestBlob: named(), ResponseBlob: named()}}}},
			RewardDetails: &state.RewardDetails{Blob: named()},
		},
	}
	got := blobsOf(a)
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("blobsOf = %v\nwant %v", got, want)
	}
}
