package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hemra-dev/hemra/state"
)

// rewardDetailsFile is what Harbor's rewardkit writes beside reward.json:
// per reward, each criterion's score, the judge's model and reasoning.
const rewardDetailsFile = "reward-details.json"

// maxRewardDetails bounds the reward-details.json kept.
const maxRewardDetails = 16 << 20

// keepRewardDetails keeps a rewardkit verifier's reward-details.json from
// the verifier's log folder: the file as a blob, and per reward its
// criteria with their scores and reasoning (cut to state.MaxReasoning
// characters) and the judge's model. A file that is missing changes
// nothing; one that cannot be read is noted, never the attempt's error.
func (a *attemptRun) keepRewardDetails(logs string) {
	data, err := readDetails(filepath.Join(logs, rewardDetailsFile))
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		a.log.note("verify", "verify", "reward-details.json not kept: "+err.Error())
		return
	}
	sha, err := a.e.store.PutBlob(data)
	if err != nil {
		a.log.note("verify", "verify", "reward-details.json not kept: "+err.Error())
		return
	}
	d := &state.RewardDetails{Blob: sha}
	rewards, err := parseRewardDetails(data)
	if err != nil {
		a.log.note("verify", "verify", "reward-details.json kept but not read: "+err.Error())
	}
	d.Rewards = rewards
	a.out.RewardDetails = d
}

func readDetails(path string) ([]byte, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", rewardDetailsFile)
	}
	if st.Size() > maxRewardDetails {
		return nil, fmt.Errorf("%s is %d bytes, over %d", rewardDetailsFile, st.Size(), maxRewardDetails)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxRewardDetails))
}

// rkDetail is one reward of reward-details.json, as rewardkit's
// Reward.to_detail_dict writes it.
type rkDetail struct {
	Score    *float64 `json:"score"`
	Kind     string   `json:"kind"`
	Criteria []struct {
		Name      string          `json:"name"`
		Value     *float64        `json:"value"`
		Raw       json.RawMessage `json:"raw"`
		Weight    *float64        `json:"weight"`
		Reasoning string          `json:"reasoning"`
		Error     string          `json:"error"`
	} `json:"criteria"`
	Judge *struct {
		Model string `json:"model"`
		Agent string `json:"agent"`
	} `json:"judge"`
}

// parseRewardDetails reads rewardkit's reward-details.json: an object of
// reward name → its detail, or a list of details when several judge
// files share a folder's name.
func parseRewardDetails(data []byte) ([]state.RewardDetail, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	names := make([]string, 0, len(top))
	for n := range top {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []state.RewardDetail
	for _, n := range names {
		raw := top[n]
		var list []rkDetail
		if strings.HasPrefix(strings.TrimSpace(string(raw)), "[") {
			if err := json.Unmarshal(raw, &list); err != nil {
				return out, fmt.Errorf("reward %q: %v", n, err)
			}
		} else {
			var d rkDetail
			if err := json.Unmarshal(raw, &d); err != nil {
				return out, fmt.Errorf("reward %q: %v", n, err)
			}
			list = []rkDetail{d}
		}
		for _, d := range list {
			rd := state.RewardDetail{Name: n, Kind: d.Kind, Score: d.Score}
			if j := d.Judge; j != nil {
				switch {
				case j.Agent != "" && j.Model != "":
					rd.Judge = j.Agent + " (" + j.Model + ")"
				case j.Agent != "":
					rd.Judge = j.Agent
				default:
					rd.Judge = j.Model
				}
			}
			for _, c := range d.Criteria {
				cs := state.CriterionScore{Name: c.Name, Value: c.Value, Raw: c.Raw, Reasoning: cutRunes(c.Reasoning, state.MaxReasoning), Error: cutRunes(c.Error, state.MaxReasoning)}
				if c.Weight != nil {
					cs.Weight = *c.Weight
				}
				rd.Criteria = append(rd.Criteria, cs)
			}
			out = append(out, rd)
		}
	}
	return out, nil
}
