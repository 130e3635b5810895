package executor

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReward: whatever a verifier writes as reward.json or reward.txt (the
// one file of the verifier hemra parses) gives a finite reward or a
// verifier error, never a panic; reward.json's reward is its "reward" key,
// its only key, or the mean of its keys. Seeds: what Harbor's tasks write
// (rewardkit's reward.json, a bare reward.txt) and near misses.
func FuzzReward(f *testing.F) {
	for _, s := range []string{
		`{"reward": 1.0}`, `{"reward": 0, "tests_passed": 3, "tests_total": 4}`, `{"accuracy": 0.75}`,
		`{"a": 1, "b": 0}`, `{}`, `[1]`, `{"reward": "1"}`, `{"reward": 1e400}`, `{"reward": NaN}`,
		"1\n", "0.5", " 1 \r\n", "", "nan", "Inf", "1 2", "\ufeff1",
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		var r float64
		var rewards map[string]float64
		var err error
		if asJSON {
			r, rewards, err = parseRewardJSON(data)
		} else {
			r, rewards, err = parseRewardTxt(data)
		}
		if err != nil {
			if _, ok := err.(*rewardError); !ok {
				t.Fatalf("error of another type: %T %v", err, err)
			}
			return
		}
		if math.IsNaN(r) || math.IsInf(r, 0) {
			t.Fatalf("reward %v from %q", r, data)
		}
		if len(rewards) == 0 {
			t.Fatalf("reward %v with no named rewards from %q", r, data)
		}
		if v, ok := rewards["reward"]; ok && v != r {
			t.Fatalf("reward %v, but its \"reward\" key is %v", r, v)
		}
		// The same bytes read from the verifier's log folder.
		dir := t.TempDir()
		name := rewardTxt
		if asJSON {
			name = rewardJSON
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, _, err := readReward(dir); err != nil || got != r {
			t.Fatalf("readReward = %v, %v; parsed %v", got, err, r)
		}
	})
}
